//! One object, or a byte range of it, read into one buffer: Python's
//! `shoal.cat`, fsspec's `cat_file` and the block reads of an open file.
//!
//! Read as a download to a file is, in parallel slices each filling its
//! own part of the buffer, so the bytes are copied once. The first
//! request is sent before the object's size is known, its answer standing
//! in for a HEAD: a whole object is asked for whole (no Range header: S3
//! sends its stored CRCs only then), a range known without the size
//! (start and end both set, as fsspec's blocks are) as that range. Either
//! way a small read is one request. Only a range counted from the end, or
//! with one edge missing, starts with a HEAD.
//!
//! A whole object is verified as a download is ([`crate::verify`]): its
//! CRC32C, else CRC32 / CRC64NVME, else its composite value part by part
//! (the part list is one more request), else its MD5, computed over the
//! buffer since the whole is held here, else its length. A range of an
//! object cannot be checked against a whole-object checksum: it is pinned
//! to the version the first answer (or the caller) named, so it never
//! mixes two versions, and checked by its length. A known range that
//! turns out to cover the whole object is checked with what its ranged
//! answer carried (GCS: the CRC32C; S3: the MD5 a single-part ETag is; S3
//! sends no CRC for a ranged GET, and asking again would cost the request
//! this path saves).

use std::sync::Arc;

use futures::StreamExt;
use shoal_core::resume::resuming_stream;
use shoal_core::retry::RetryPolicy;
use shoal_core::{
    BoxByteStream, ByteRange, Error, ErrorKind, Location, ObjectMeta, ObjectVersion, Op, Result,
    Store,
};

use crate::Run;
use crate::download::take_bytes;
use crate::plan::plan_slices;
use crate::verify::{Expected, Received, Verified};

/// What a read into memory gave.
#[derive(Debug)]
pub struct Read<B = Vec<u8>> {
    /// The bytes asked for.
    pub bytes: B,
    /// How they were checked: a range is [`Verified::SizeOnly`].
    pub verified: Verified,
}

/// Memory a read fills: made by the caller once the read's length is
/// known, so the bytes land where the caller keeps them (Python's
/// `shoal.cat` fills a new `bytes` object and hands it over as it is:
/// copying 18 MiB into fresh memory costs about as long as receiving it).
pub trait Buffer: AsRef<[u8]> + AsMut<[u8]> + Send + 'static {}

impl<T: AsRef<[u8]> + AsMut<[u8]> + Send + 'static> Buffer for T {}

/// The bytes `[start, end)` of the object at `loc` (Python's slice rules:
/// None is an edge, a negative number counts from the end), pinned to
/// `pinned` when given (else to the version the first answer names),
/// resumed after broken connections, and verified when they are the whole
/// object (see the module doc).
pub(crate) async fn read_into_memory(
    store: Arc<dyn Store>,
    loc: &Location,
    start: Option<i64>,
    end: Option<i64>,
    pinned: Option<&ObjectVersion>,
    run: &Run,
    policy: RetryPolicy,
) -> Result<Read> {
    read_into(store, loc, start, end, pinned, run, policy, |n| {
        Ok(vec![0u8; n])
    })
    .await
}

/// [`read_into_memory`], the bytes put in the buffer `alloc` makes for
/// the read's length (its exact length; an error from it ends the read).
#[allow(clippy::too_many_arguments)]
pub async fn read_into<B: Buffer>(
    store: Arc<dyn Store>,
    loc: &Location,
    start: Option<i64>,
    end: Option<i64>,
    pinned: Option<&ObjectVersion>,
    run: &Run,
    policy: RetryPolicy,
    alloc: impl FnOnce(usize) -> Result<B>,
) -> Result<Read<B>> {
    let url = loc.to_string();
    let first = match (start, end) {
        (Some(a), Some(b)) if a >= 0 && b > a => {
            let (s0, s1) = slices_of(run, a as u64, b as u64)[0];
            get_first(&store, loc, ByteRange::new(s0, s1), pinned).await?
        }
        (None | Some(0), None) => get_first(&store, loc, ByteRange::from(0), pinned).await?,
        _ => None,
    };
    let meta = match &first {
        Some(r) => r.meta.clone(),
        None => head_pinned(&store, loc, &url, pinned).await?,
    };
    let (a, b) = resolve(start, end, meta.size);
    let whole = (a, b) == (0, meta.size);
    let (slices, first_body) = match first {
        // The first slice as answered (cut at the object's end, and at
        // the first slice's end when the whole object was asked for),
        // then the rest of the range.
        Some(r) => {
            let s0 = r.range.start;
            let s1 = r.range.end.unwrap_or(meta.size).min(b);
            let s1 = if s0 == 0 && s1 == b && b > 0 {
                slices_of(run, 0, b)[0].1
            } else {
                s1
            };
            let answered = r.range.end.unwrap_or(meta.size).min(meta.size);
            let body = if s1 < answered {
                take_bytes(r.body, s1 - s0)
            } else {
                r.body
            };
            let mut v = vec![(s0, s1)];
            if s1 < b {
                v.extend(slices_of(run, s1, b));
            }
            (v, Some(body))
        }
        None => (slices_of(run, a, b), None),
    };
    let expected = if whole {
        Expected::learn(&store, loc, &meta, Op::Download, &run.budgets.rates).await?
    } else {
        Expected::None
    };
    let mut buf = alloc((b - a) as usize)?;
    if buf.as_ref().len() != (b - a) as usize {
        return Err(Error::new(
            ErrorKind::Io,
            Op::Download,
            &url,
            format!(
                "a buffer of {} bytes was given for {} bytes",
                buf.as_ref().len(),
                b - a
            ),
        ));
    }
    let got = read_slices(
        &store,
        loc,
        &url,
        &slices,
        buf.as_mut(),
        meta.version.clone(),
        first_body,
        policy,
        whole.then_some(&expected),
    )
    .await?;
    if !whole {
        return Ok(Read {
            bytes: buf,
            verified: Verified::SizeOnly,
        });
    }
    let got = Received::combine(&got);
    let (verified, bytes) = (expected.check_buffer(&got, buf, Op::Download, &url)).await?;
    Ok(Read { bytes, verified })
}

/// One read of [`read_ranges`]: the bytes `[start, end)` of `loc` (the
/// slice rules of [`read_into_memory`]), pinned to `pinned` when given.
pub struct RangeRead {
    /// The object's store.
    pub store: Arc<dyn Store>,
    /// The object.
    pub loc: Location,
    /// First byte (None: 0; negative: from the end).
    pub start: Option<i64>,
    /// End, exclusive (None: the object's end; negative: from the end).
    pub end: Option<i64>,
    /// The version the bytes must be (GCS generation, S3 ETag).
    pub pinned: Option<ObjectVersion>,
}

/// Largest read that several nearby ranges are joined into: as big as
/// Arrow's own coalescing goes (its `range_size_limit`, 32 MiB), so a
/// joined read is still one request, not a sliced one.
const JOINED_MAX: u64 = 32 << 20;

/// Many reads at once (fsspec's `cat_ranges`, pyarrow's pre-buffered
/// column chunks): each as [`read_into_memory`] reads it, at most
/// `run.opts.small_workers` requests in flight. Known ranges of one object
/// (and one pinned version) that lie within `hole` bytes of each other
/// are read as one request and cut apart: a request costs a round trip
/// and the server's per-request work, a hole of a few KiB costs neither.
/// Results come back in the order asked, each its own success or error
/// (a failed joined read fails each range it held).
pub async fn read_ranges(
    reads: Vec<RangeRead>,
    hole: u64,
    run: &Run,
    policy: RetryPolicy,
) -> Vec<Result<Vec<u8>>> {
    // Groups of indexes read by one request each: the first read's index,
    // the byte span asked for (None: the whole object), the members.
    type Group = (usize, Option<(u64, u64)>, Vec<usize>);
    let mut groups: Vec<Group> = Vec::new();
    let mut known: Vec<usize> = Vec::new();
    for (i, r) in reads.iter().enumerate() {
        match (r.start, r.end) {
            (Some(a), Some(b)) if a >= 0 && b > a => known.push(i),
            _ => groups.push((i, None, vec![i])),
        }
    }
    let key = |i: usize| {
        let r = &reads[i];
        (r.loc.to_string(), r.pinned.as_ref().map(|v| v.to_string()))
    };
    let bounds = |i: usize| {
        (
            reads[i].start.unwrap_or(0) as u64,
            reads[i].end.unwrap_or(0) as u64,
        )
    };
    known.sort_by(|&x, &y| key(x).cmp(&key(y)).then(bounds(x).cmp(&bounds(y))));
    for i in known {
        let (a, b) = bounds(i);
        if let Some((lead, Some((g0, g1)), members)) = groups.last_mut()
            && key(*lead) == key(i)
            && a <= g1.saturating_add(hole)
            && b.max(*g1) - *g0 <= JOINED_MAX
        {
            *g1 = (*g1).max(b);
            members.push(i);
            continue;
        }
        groups.push((i, Some((a, b)), vec![i]));
    }
    let reads = &reads;
    let jobs = groups.into_iter().map(|(lead, span, members)| async move {
        let r = &reads[lead];
        let (start, end) = match span {
            Some((a, b)) => (Some(a as i64), Some(b as i64)),
            None => (r.start, r.end),
        };
        let got = read_into_memory(
            r.store.clone(),
            &r.loc,
            start,
            end,
            r.pinned.as_ref(),
            run,
            policy,
        )
        .await
        .map(|read| read.bytes);
        (span, members, got)
    });
    let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reads.len()).map(|_| None).collect();
    let mut done = futures::stream::iter(jobs).buffer_unordered(run.opts.small_workers.max(1));
    while let Some((span, members, got)) = done.next().await {
        match (span, got) {
            (None, got) => out[members[0]] = Some(got),
            (Some(_), Ok(bytes)) if members.len() == 1 => out[members[0]] = Some(Ok(bytes)),
            (Some((g0, _)), Ok(bytes)) => {
                for i in members {
                    let (a, b) = bounds(i);
                    // A joined read past the object's end came back short.
                    let from = ((a - g0) as usize).min(bytes.len());
                    let to = ((b - g0) as usize).min(bytes.len());
                    out[i] = Some(Ok(bytes[from..to].to_vec()));
                }
            }
            (Some(_), Err(e)) => {
                for &i in &members[1..] {
                    let mut dup = Error::new(e.kind(), e.op(), e.url(), e.message());
                    if let Some(s) = e.status() {
                        dup = dup.with_status(s);
                    }
                    out[i] = Some(Err(dup));
                }
                out[members[0]] = Some(Err(e));
            }
        }
    }
    out.into_iter()
        .map(|r| r.expect("every read was answered"))
        .collect()
}

/// Resolves Python-style `[start, end)` (None = edge, negative = from the
/// end) against `size`.
fn resolve(start: Option<i64>, end: Option<i64>, size: u64) -> (u64, u64) {
    let at = |v: i64| {
        if v < 0 {
            size.saturating_sub(v.unsigned_abs())
        } else {
            (v as u64).min(size)
        }
    };
    let s = start.map_or(0, at);
    let e = end.map_or(size, at);
    (s, e.max(s))
}

/// `[from, to)` cut into slices as for a download to a file (never none).
fn slices_of(run: &Run, from: u64, to: u64) -> Vec<(u64, u64)> {
    let v: Vec<(u64, u64)> = plan_slices(to - from, run.opts.workers, run.opts.min_slice, None)
        .into_iter()
        .map(|(s0, s1)| (from + s0, from + s1))
        .collect();
    if v.is_empty() { vec![(from, to)] } else { v }
}

/// Asks for `range` before the object's size is known; its answer also
/// gives the metadata. None when the range starts past the end (416, or
/// an empty object asked for whole): a HEAD then answers it with no bytes.
async fn get_first(
    store: &Arc<dyn Store>,
    loc: &Location,
    range: ByteRange,
    pinned: Option<&ObjectVersion>,
) -> Result<Option<shoal_core::GetResponse>> {
    match store.get(&loc.bucket, &loc.key, range, pinned).await {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.status() == Some(416) => Ok(None),
        Err(e) => Err(e.with_url(loc.to_string()).with_op(Op::Download)),
    }
}

/// The object's metadata by HEAD, refused if it is no longer `pinned`.
async fn head_pinned(
    store: &Arc<dyn Store>,
    loc: &Location,
    url: &str,
    pinned: Option<&ObjectVersion>,
) -> Result<ObjectMeta> {
    let meta = (store.head(&loc.bucket, &loc.key))
        .await
        .map_err(|e| e.with_url(url).with_op(Op::Download))?;
    if let Some(want) = pinned
        && meta.version.as_ref() != Some(want)
    {
        let now = (meta.version).map_or("no version".to_owned(), |v| v.to_string());
        return Err(Error::new(
            ErrorKind::Changed,
            Op::Download,
            url,
            format!("the object was replaced since it was opened ({want}, now {now})"),
        )
        .with_hint("open it again to read the new version"));
    }
    Ok(meta)
}

/// Reads `slices` (together `buf`'s length, in order) in parallel into
/// `buf`, each into its own part, hashed as `expected` says when given;
/// `first_body` is the first slice's already-open body.
#[allow(clippy::too_many_arguments)]
async fn read_slices(
    store: &Arc<dyn Store>,
    loc: &Location,
    url: &str,
    slices: &[(u64, u64)],
    buf: &mut [u8],
    version: Option<ObjectVersion>,
    mut first_body: Option<BoxByteStream>,
    policy: RetryPolicy,
    expected: Option<&Expected>,
) -> Result<Vec<Received>> {
    let mut rest: &mut [u8] = buf;
    let mut parts = Vec::with_capacity(slices.len());
    for &(s0, s1) in slices {
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut((s1 - s0) as usize);
        rest = tail;
        let body = resuming_stream(
            store.clone(),
            &loc.bucket,
            &loc.key,
            url,
            ByteRange::new(s0, s1),
            version.clone(),
            first_body.take(),
            policy,
        );
        parts.push(fill_slice(body, mine, expected.map(|e| e.running(s0))));
    }
    let mut got = Vec::with_capacity(parts.len());
    for r in futures::future::join_all(parts).await {
        got.push(r.map_err(|e| e.with_url(url))?);
    }
    Ok(got)
}

/// Copies `body` into `buf` (its exact length), hashing it into `sums`.
async fn fill_slice(
    mut body: BoxByteStream,
    buf: &mut [u8],
    mut sums: Option<shoal_core::checksum::Running>,
) -> Result<Received> {
    let mut at = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        let n = chunk.len().min(buf.len() - at);
        buf[at..at + n].copy_from_slice(&chunk[..n]);
        if let Some(s) = &mut sums {
            s.update(&chunk);
        }
        at += chunk.len();
    }
    if at != buf.len() {
        return Err(Error::new(
            ErrorKind::Integrity,
            Op::Download,
            "",
            format!("expected {} bytes, received {at}", buf.len()),
        ));
    }
    Ok(match sums {
        Some(s) => Received::of(s, at as u64),
        None => Received::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransferOptions;
    use bytes::Bytes;
    use shoal_core::checksum::{CrcKind, md5_digest};
    use shoal_core::memory::MemoryStore;
    use shoal_core::{Assemble, PutOptions};
    use shoal_core::{BucketStore, MultipartStore};

    const SIZE: usize = 3_000_000;

    fn body() -> Vec<u8> {
        (0..SIZE as u32).map(|i| (i % 251) as u8).collect()
    }

    /// Slices of 1 MiB, so a 3 MB object is read as three.
    fn run() -> Run {
        Run::new(TransferOptions {
            workers: 4,
            min_slice: 1 << 20,
            ..TransferOptions::default()
        })
    }

    async fn store_with(key: &str, opts: &PutOptions) -> (Arc<MemoryStore>, Location) {
        let mem = Arc::new(MemoryStore::new());
        mem.create_bucket("b").await.unwrap();
        mem.put("b", key, Bytes::from(body()), opts).await.unwrap();
        (mem, Location::parse(&format!("gs://b/{key}")).unwrap())
    }

    async fn read(
        mem: &Arc<MemoryStore>,
        loc: &Location,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Read> {
        let store: Arc<dyn Store> = mem.clone();
        read_into_memory(store, loc, start, end, None, &run(), RetryPolicy::default()).await
    }

    /// Flips one byte of the third slice, leaving the object's checksums.
    fn damage(mem: &MemoryStore) {
        mem.tamper("b", "k", |data, _| data[2_500_000] ^= 1);
    }

    /// An object with only an MD5 (an S3 PUT without a checksum, its
    /// ETag) is checked against it when read whole: before, only a
    /// CRC32C was checked, so a damaged read passed on its length.
    #[tokio::test]
    async fn a_whole_md5_only_object_is_checked_and_a_damaged_one_refused() {
        let (mem, loc) = store_with("k", &PutOptions::default()).await;
        mem.tamper("b", "k", |_, m| m.checksums = m.checksums.with_crc32c(None));
        let r = read(&mem, &loc, None, None).await.unwrap();
        assert_eq!((r.bytes == body(), r.verified), (true, Verified::Md5));
        damage(&mem);
        let e = read(&mem, &loc, None, None).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(e.to_string().contains("MD5 mismatch"), "{e}");
        // A known range covering the whole object is checked too.
        let e = read(&mem, &loc, Some(0), Some(SIZE as i64 + 10)).await;
        assert!(e.unwrap_err().to_string().contains("MD5 mismatch"));
        // A range cannot be: it is checked by its length.
        let r = read(&mem, &loc, Some(10), Some(2_600_000)).await.unwrap();
        assert_eq!(r.verified, Verified::SizeOnly);
        assert_eq!(r.bytes.len(), 2_600_000 - 10);
    }

    /// The same for CRC32 and CRC64NVME objects (S3 keeps one CRC, the
    /// algorithm the writer chose).
    #[tokio::test]
    async fn whole_crc32_and_crc64nvme_objects_are_checked() {
        for (kind, verified) in [
            (CrcKind::Crc32, Verified::Crc32),
            (CrcKind::Crc64Nvme, Verified::Crc64Nvme),
        ] {
            let put = PutOptions {
                other_crc: Some(kind.checksum(&body())),
                ..Default::default()
            };
            let (mem, loc) = store_with("k", &put).await;
            let r = read(&mem, &loc, None, None).await.unwrap();
            assert_eq!((r.bytes == body(), r.verified), (true, verified));
            damage(&mem);
            let e = read(&mem, &loc, None, None).await.unwrap_err();
            assert!(
                e.to_string().contains(&format!("{} mismatch", kind.name())),
                "{e}"
            );
        }
    }

    /// A composite checksum is checked part by part with the part list.
    #[tokio::test]
    async fn a_whole_composite_object_is_checked_part_by_part() {
        let mem = Arc::new(MemoryStore::new());
        mem.create_bucket("b").await.unwrap();
        let put = PutOptions {
            assemble: Assemble::Composite,
            ..Default::default()
        };
        let up = mem.multipart_start("b", "k", &put).await.unwrap();
        let mut parts = Vec::new();
        for (i, c) in body().chunks(1_100_000).enumerate() {
            let data = Bytes::copy_from_slice(c);
            let p = mem.multipart_put(&up, i as u32 + 1, data, crc32c::crc32c(c));
            parts.push(p.await.unwrap());
        }
        mem.multipart_complete(&up, &parts, None).await.unwrap();
        let loc = Location::parse("gs://b/k").unwrap();
        let r = read(&mem, &loc, None, None).await.unwrap();
        let per_part = Verified::Parts(shoal_core::checksum::PartKind::Crc32c);
        assert_eq!((r.bytes == body(), r.verified), (true, per_part));
        damage(&mem);
        let e = read(&mem, &loc, None, None).await.unwrap_err();
        assert!(e.to_string().contains("mismatch in part 3 of 3"), "{e}");
    }

    /// CRC32C as before; an object with no checksum by its length.
    #[tokio::test]
    async fn crc32c_and_no_checksum() {
        let (mem, loc) = store_with("k", &PutOptions::default()).await;
        let r = read(&mem, &loc, Some(0), None).await.unwrap();
        assert_eq!((r.bytes == body(), r.verified), (true, Verified::Crc32c));
        damage(&mem);
        let e = read(&mem, &loc, None, None).await.unwrap_err();
        assert!(e.to_string().contains("CRC32C mismatch"), "{e}");
        mem.tamper("b", "k", |_, m| {
            m.checksums = m.checksums.with_crc32c(None).with_md5(None)
        });
        let r = read(&mem, &loc, None, None).await.unwrap();
        assert_eq!(r.verified, Verified::SizeOnly);
        assert_ne!(md5_digest(&r.bytes), md5_digest(&body()));
    }

    /// Ranges near each other are joined into one read and cut apart,
    /// answered in the order asked; a missing object fails only its own.
    #[tokio::test]
    async fn many_ranges_are_joined_cut_apart_and_answered_in_order() {
        let (mem, loc) = store_with("k", &PutOptions::default()).await;
        let store: Arc<dyn Store> = mem.clone();
        let at = |start: Option<i64>, end: Option<i64>, key: &str| RangeRead {
            store: store.clone(),
            loc: Location::parse(&format!("gs://b/{key}")).unwrap(),
            start,
            end,
            pinned: None,
        };
        let reads = vec![
            at(Some(5000), Some(6000), "k"),
            at(Some(10), Some(20), "k"),
            at(Some(0), Some(5), "gone"),
            at(Some(2_000_000), Some(2_000_100), "k"),
            at(Some(15), Some(4000), "k"),
            at(Some(-3), None, "k"),
            at(Some(SIZE as i64 - 2), Some(SIZE as i64 + 50), "k"),
        ];
        let got = read_ranges(reads, 8 << 10, &run(), RetryPolicy::default()).await;
        let b = body();
        let want = |a: usize, z: usize| Some(b[a..z.min(SIZE)].to_vec());
        assert_eq!(got[0].as_ref().ok().cloned(), want(5000, 6000));
        assert_eq!(got[1].as_ref().ok().cloned(), want(10, 20));
        assert_eq!(got[2].as_ref().unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(got[3].as_ref().ok().cloned(), want(2_000_000, 2_000_100));
        assert_eq!(got[4].as_ref().ok().cloned(), want(15, 4000));
        assert_eq!(got[5].as_ref().ok().cloned(), want(SIZE - 3, SIZE));
        assert_eq!(got[6].as_ref().ok().cloned(), want(SIZE - 2, SIZE + 50));
        let _ = loc;
    }

    /// A caller's buffer is made for the read's length once that is
    /// known (a range past the end is cut to the object), filled in
    /// parallel slices and verified whole; one of the wrong length is an
    /// error, not a panic.
    #[tokio::test]
    async fn a_read_fills_the_buffer_its_caller_makes() {
        let (mem, loc) = store_with("k", &PutOptions::default()).await;
        let store: Arc<dyn Store> = mem.clone();
        let asked = std::sync::Mutex::new(Vec::new());
        let alloc = |n: usize| {
            asked.lock().unwrap().push(n);
            Ok(vec![7u8; n].into_boxed_slice())
        };
        let (p, run) = (RetryPolicy::default(), run());
        let r = read_into(store.clone(), &loc, None, None, None, &run, p, alloc).await;
        let r = r.unwrap();
        assert_eq!(&r.bytes[..], &body()[..]);
        assert_eq!(r.verified, Verified::Crc32c);
        let end = Some(SIZE as i64 + 99);
        let r = read_into(store.clone(), &loc, Some(10), end, None, &run, p, alloc).await;
        assert_eq!(&r.unwrap().bytes[..], &body()[10..]);
        assert_eq!(*asked.lock().unwrap(), [SIZE, SIZE - 10]);
        let short = |n: usize| Ok(vec![0u8; n - 1]);
        let e = read_into(store, &loc, Some(0), Some(100), None, &run, p, short).await;
        let e = e.unwrap_err().to_string();
        assert!(e.contains("a buffer of 99 bytes was given for 100"), "{e}");
    }

    /// Small objects and ranges of them, whole or known, and empty ones.
    #[tokio::test]
    async fn small_and_empty_objects() {
        let mem = Arc::new(MemoryStore::new());
        mem.create_bucket("b").await.unwrap();
        mem.put("b", "s", Bytes::from_static(b"hello"), &Default::default())
            .await
            .unwrap();
        let loc = Location::parse("gs://b/s").unwrap();
        for (start, end, want) in [
            (None, None, &b"hello"[..]),
            (Some(1), Some(100), &b"ello"[..]),
            (Some(-2), None, &b"lo"[..]),
        ] {
            assert_eq!(read(&mem, &loc, start, end).await.unwrap().bytes, want);
        }
        // Empty objects read as empty, whole or from offset 0.
        mem.put("b", "e", Bytes::new(), &Default::default())
            .await
            .unwrap();
        let loc = Location::parse("gs://b/e").unwrap();
        for (start, end) in [(None, None), (Some(0), Some(10))] {
            assert!(read(&mem, &loc, start, end).await.unwrap().bytes.is_empty());
        }
    }
}
