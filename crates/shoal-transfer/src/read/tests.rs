//! The read engine on the in-memory store: order, decoding, budgets that
//! are smaller than one object, errors that name the object.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use shoal_core::memory::MemoryStore;
use shoal_core::retry::RetryPolicy;
use shoal_core::{BucketStore, Location, PutOptions, Store};

use super::*;

fn text(n: usize, seed: u64) -> Vec<u8> {
    // Compressible but not trivial: words from a small vocabulary, lines.
    let words = [
        "shoal", "bucket", "object", "range", "slice", "zstd", "gzip", "line",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % 8) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(n);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

struct Set {
    mem: Arc<MemoryStore>,
    store: Arc<dyn Store>,
    /// (key, stored bytes, decoded bytes)
    objects: Vec<(String, Vec<u8>, Vec<u8>)>,
}

async fn put(set: &mut Set, key: &str, stored: Vec<u8>, decoded: Vec<u8>, encoding: Option<&str>) {
    let opts = PutOptions {
        content_encoding: encoding.map(str::to_owned),
        ..Default::default()
    };
    set.store
        .put("b", key, Bytes::from(stored.clone()), &opts)
        .await
        .unwrap();
    set.objects.push((key.to_owned(), stored, decoded));
}

/// An empty bucket `b` on a memory store.
async fn empty_set() -> Set {
    let mem = Arc::new(MemoryStore::new());
    mem.create_bucket("b").await.unwrap();
    Set {
        store: mem.clone(),
        mem,
        objects: Vec::new(),
    }
}

/// Plain, zstd (multi-frame), gzip (multi-member), empty, big, and a
/// gzip-encoded object, in key order.
async fn mixed() -> Set {
    let mut set = empty_set().await;
    let a = text(300_000, 1);
    put(&mut set, "a.txt", a.clone(), a, None).await;
    let b = text(3_000_000, 2);
    let mut bz = zstd(&b[..1_000_000]);
    bz.extend(zstd(&b[1_000_000..]));
    put(&mut set, "b.zst", bz, b, None).await;
    put(&mut set, "c.empty.gz", Vec::new(), Vec::new(), None).await;
    let d = text(500_000, 4);
    let mut dg = gzip(&d[..100]);
    dg.extend(gzip(&d[100..]));
    put(&mut set, "d.gz", dg, d, None).await;
    let e = text(9_000_000, 5);
    put(&mut set, "e.zst", zstd(&e), e, None).await;
    let f = text(200_000, 6);
    put(&mut set, "f.json", gzip(&f), f, Some("gzip")).await;
    set
}

fn sources(set: &Set) -> BoxStream<'static, Result<Source>> {
    let store = set.store.clone();
    let keys: Vec<String> = set.objects.iter().map(|o| o.0.clone()).collect();
    futures::stream::iter(keys)
        .then(move |k| {
            let store = store.clone();
            async move {
                let meta = store.head("b", &k).await?;
                let loc = Location::parse(&format!("gs://b/{k}")).unwrap();
                Ok(Source::object(store, loc, meta))
            }
        })
        .boxed()
}

/// Each object's output, in the order the reader gave them.
async fn read_all(set: &Set, opts: ReadOptions) -> Vec<(usize, Result<Vec<u8>, String>)> {
    let mut r = Reader::start(sources(set), opts, RetryPolicy::default());
    let mut out = Vec::new();
    while let Some(o) = r.next_object().await {
        let mut o = o.unwrap();
        let mut bytes = Vec::new();
        let mut err = None;
        while let Some(c) = o.next().await {
            match c {
                Ok(c) => bytes.extend_from_slice(&c),
                Err(e) => err = Some(e.to_string()),
            }
        }
        out.push((o.index, err.map_or(Ok(bytes), Err)));
    }
    out
}

fn opts(decompress: Decompress, ordered: bool, read_ahead: u64) -> ReadOptions {
    ReadOptions {
        workers: 4,
        requests: 4,
        read_ahead,
        decompress,
        ordered,
        slice_size: Some(1 << 20),
        fetched: None,
        rates: crate::rate::Rates::default(),
    }
}

#[tokio::test]
async fn ordered_detect_decodes_every_format_in_listing_order() {
    let set = mixed().await;
    let got = read_all(&set, opts(Decompress::Detect, true, 64 << 20)).await;
    let idx: Vec<usize> = got.iter().map(|g| g.0).collect();
    assert_eq!(idx, (0..set.objects.len()).collect::<Vec<_>>());
    for ((_, out), (key, _, want)) in got.into_iter().zip(&set.objects) {
        assert!(out.as_ref().unwrap() == want, "{key} differs");
    }
}

#[tokio::test]
async fn off_passes_stored_bytes_and_default_decodes_only_content_encoding() {
    let set = mixed().await;
    let got = read_all(&set, opts(Decompress::Off, true, 64 << 20)).await;
    for ((_, out), (key, stored, _)) in got.into_iter().zip(&set.objects) {
        assert!(out.as_ref().unwrap() == stored, "{key} differs");
    }
    let got = read_all(&set, opts(Decompress::ContentEncoding, true, 64 << 20)).await;
    for ((_, out), (key, stored, decoded)) in got.into_iter().zip(&set.objects) {
        let want = if key == "f.json" { decoded } else { stored };
        assert!(out.as_ref().unwrap() == want, "{key} differs");
    }
}

#[tokio::test]
async fn a_budget_smaller_than_one_object_still_finishes() {
    // 2 MiB of read-ahead against a 9 MB object read in 1 MiB slices: the
    // reader must neither deadlock nor lose order.
    let set = mixed().await;
    for ordered in [true, false] {
        for mode in [Decompress::Off, Decompress::Detect] {
            let got = read_all(&set, opts(mode, ordered, 2 << 20)).await;
            assert_eq!(got.len(), set.objects.len());
            for (i, out) in got {
                let (key, stored, decoded) = &set.objects[i];
                let want = if mode == Decompress::Off {
                    stored
                } else {
                    decoded
                };
                assert!(
                    out.as_ref().unwrap() == want,
                    "{key} differs ({mode:?}, ordered {ordered})"
                );
            }
        }
    }
}

#[tokio::test]
async fn unordered_gives_every_object_once_and_whole() {
    let set = mixed().await;
    let got = read_all(&set, opts(Decompress::Detect, false, 64 << 20)).await;
    let mut idx: Vec<usize> = got.iter().map(|g| g.0).collect();
    idx.sort();
    assert_eq!(idx, (0..set.objects.len()).collect::<Vec<_>>());
    for (i, out) in got {
        assert!(out.unwrap() == set.objects[i].2, "{}", set.objects[i].0);
    }
}

#[tokio::test]
async fn corrupt_zstd_names_the_object_and_offset_and_the_rest_still_reads() {
    let mut set = mixed().await;
    let good = text(2_000_000, 9);
    let mut bad = zstd(&good);
    let at = bad.len() / 2;
    for b in &mut bad[at..at + 64] {
        *b ^= 0x5a;
    }
    put(&mut set, "g.zst", bad, good, None).await;
    let tail = text(1000, 10);
    put(&mut set, "h.txt", tail.clone(), tail, None).await;
    let got = read_all(&set, opts(Decompress::Detect, true, 64 << 20)).await;
    let (_, g) = &got[set.objects.len() - 2];
    let e = g.as_ref().unwrap_err();
    assert!(e.contains("read gs://b/g.zst"), "{e}");
    assert!(e.contains("zstd data corrupt at compressed offset"), "{e}");
    let offset: u64 = e
        .split("offset ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    // Within one feed (plus one zstd block) of the damage.
    assert!(offset <= at as u64 + 64, "{offset} vs {at}");
    assert!(
        offset + (decode::MAX_FEED as u64) + (128 << 10) >= at as u64,
        "{offset} vs {at}"
    );
    assert!(got.last().unwrap().1.as_ref().unwrap() == &set.objects.last().unwrap().2);
}

#[tokio::test]
async fn streams_cut_mid_slice_resume_byte_identical() {
    let set = mixed().await;
    set.mem.cut_streams_after(Some(300_000));
    let got = read_all(&set, opts(Decompress::Detect, true, 8 << 20)).await;
    for ((_, out), (key, _, want)) in got.into_iter().zip(&set.objects) {
        assert!(out.as_ref().unwrap() == want, "{key} differs");
    }
}

#[tokio::test]
async fn fetched_counts_stored_bytes() {
    let set = mixed().await;
    let fetched = Arc::new(AtomicU64::new(0));
    let mut o = opts(Decompress::Detect, false, 64 << 20);
    o.fetched = Some(fetched.clone());
    read_all(&set, o).await;
    let stored: usize = set.objects.iter().map(|o| o.1.len()).sum();
    assert_eq!(fetched.load(Ordering::Relaxed), stored as u64);
}

#[test]
fn plan_cuts_big_objects_and_keeps_encoded_whole() {
    let meta = |size, enc: Option<&str>| ObjectMeta {
        size,
        content_encoding: enc.map(str::to_owned),
        ..Default::default()
    };
    assert!(plan(&meta(0, None), 10).is_empty());
    assert_eq!(plan(&meta(15, None), 10), vec![(0, 15)]);
    assert_eq!(plan(&meta(30, None), 10), vec![(0, 10), (10, 20), (20, 30)]);
    assert_eq!(plan(&meta(31, None), 10).last(), Some(&(24, 31)));
    assert_eq!(plan(&meta(100, Some("gzip")), 10), vec![(0, 100)]);
}

/// `cat`/`bench read` under `--rate-limit` and `--max-requests-per-sec`:
/// on paused time, so the pacing is asserted exactly, not by a clock.
#[tokio::test(start_paused = true)]
async fn rates_pace_fetched_bytes_and_ranged_requests() {
    use std::time::Duration;
    let mut set = empty_set().await;
    for i in 0..3 {
        let t = text(1 << 20, 20 + i);
        put(&mut set, &format!("{i}.txt"), t.clone(), t, None).await;
    }
    let t0 = tokio::time::Instant::now();
    let mut o = opts(Decompress::Off, true, 64 << 20);
    o.rates = crate::rate::Rates::new(Some(1 << 20), None);
    let got = read_all(&set, o).await;
    assert!(got.iter().all(|g| g.1.is_ok()));
    // 3 MiB at 1 MiB/s, the first tenth of a second's worth at once.
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_millis(3000),
        "{took:?}"
    );

    // Slices of 256 KiB: 12 ranged GETs at 4/s, the first at once.
    let t0 = tokio::time::Instant::now();
    let mut o = opts(Decompress::Off, false, 64 << 20);
    o.slice_size = Some(256 << 10);
    o.rates = crate::rate::Rates::new(None, Some(4));
    let got = read_all(&set, o).await;
    assert!(got.iter().all(|g| g.1.is_ok()));
    assert_eq!(t0.elapsed(), Duration::from_millis(2750));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoded_bytes_stay_within_the_budget_while_the_writer_stalls() {
    // Each object decodes to less than one decoder's share, so without a
    // bound over objects every decoder would finish its object and start
    // the next: the whole dataset would sit decoded behind a stalled writer.
    let mut set = empty_set().await;
    for i in 0..40 {
        let d = text(1_500_000, 100 + i);
        put(&mut set, &format!("o{i:02}.zst"), zstd(&d), d, None).await;
    }
    let read_ahead = 16 << 20;
    let mut r = Reader::start(
        sources(&set),
        opts(Decompress::Detect, true, read_ahead),
        RetryPolicy::default(),
    );
    let first = r.next_object().await.unwrap().unwrap();
    // Let decoders run as far as they can; poll until nothing moves.
    let mut last = u64::MAX;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let now = r.decoded_held();
        if now == last {
            break;
        }
        last = now;
    }
    let held = r.decoded_held();
    assert!(held > 0, "decoders never started");
    assert!(
        held <= read_ahead / 2,
        "{held} decoded bytes held behind a stalled writer, budget {}",
        read_ahead / 2
    );
    // And everything still comes out, whole and in order.
    drop(first);
    let mut n = 1;
    while let Some(o) = r.next_object().await {
        let mut o = o.unwrap();
        let mut got = Vec::new();
        while let Some(c) = o.next().await {
            got.extend_from_slice(&c.unwrap());
        }
        assert_eq!(got, set.objects[o.index].2, "object {}", o.index);
        n += 1;
    }
    assert_eq!(n, 40);
    drop(r);
}

/// A block comes back to the pool whole, short (an object's last) or
/// not at all (still shared), and a short one is handed out again at full
/// length with its bytes as they were: not zeroed a second time.
#[test]
fn blocks_come_back_whole_without_zeroing_again() {
    let pool = BlockPool::default();
    let mut b = pool.take();
    assert_eq!(b.len(), BLOCK);
    b.fill(7);
    let at = b.as_ptr();
    b.truncate(10);
    pool.put(b.freeze());
    let again = pool.take();
    assert_eq!((again.as_ptr(), again.len()), (at, BLOCK));
    assert!(again.iter().all(|&x| x == 7), "the tail was zeroed again");
    // A full block round-trips too.
    pool.put(again.freeze());
    assert_eq!(pool.kept.lock().unwrap().len(), 1);
    // One whose bytes are still shared elsewhere is not kept.
    let b = pool.take();
    let shared = b.freeze();
    let elsewhere = shared.slice(5..9);
    pool.put(shared);
    assert_eq!(pool.kept.lock().unwrap().len(), 0);
    drop(elsewhere);
    assert_eq!(pool.out.load(Ordering::Relaxed), 0);
}

/// Objects whose only checksum is an MD5 (an S3 PUT without a checksum)
/// are checked against it, hashed in order as they are handed on, read
/// as stored or through the decoder thread: before, such a damaged
/// object passed on its length.
#[tokio::test]
async fn md5_only_objects_are_checked_in_order_and_a_damaged_one_named() {
    let set = mixed().await;
    for (key, _, _) in &set.objects {
        set.mem
            .tamper("b", key, |_, m| m.checksums = m.checksums.with_crc32c(None));
    }
    for mode in [Decompress::Off, Decompress::Detect] {
        let got = read_all(&set, opts(mode, true, 4 << 20)).await;
        for ((_, out), (key, stored, decoded)) in got.into_iter().zip(&set.objects) {
            let want = if mode == Decompress::Off {
                stored
            } else {
                decoded
            };
            assert!(out.as_ref().unwrap() == want, "{key} differs");
        }
    }
    // One byte of a plain 300 kB object and of the last 1 MiB slice of a
    // 9 MB one (stored bytes), changed behind their MD5s.
    set.mem.tamper("b", "a.txt", |d, _| d[200_000] ^= 1);
    set.mem.tamper("b", "e.zst", |d, _| {
        let at = d.len() - 10;
        d[at] ^= 1
    });
    for mode in [Decompress::Off, Decompress::Detect] {
        let got = read_all(&set, opts(mode, true, 4 << 20)).await;
        let e = got[0].1.as_ref().unwrap_err();
        assert!(
            e.contains("gs://b/a.txt") && e.contains("MD5 mismatch"),
            "{e}"
        );
        if mode == Decompress::Off {
            let e = got[4].1.as_ref().unwrap_err();
            assert!(
                e.contains("gs://b/e.zst") && e.contains("MD5 mismatch"),
                "{e}"
            );
        }
        assert!(got[1].1.is_ok(), "the others still read");
    }
}
