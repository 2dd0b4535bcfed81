//! The transfer engines against the in-memory store: exact bytes at every
//! slice boundary, resumption after broken streams, corruption caught,
//! nothing left behind on failure.

use std::sync::Arc;

use bytes::Bytes;
use shoal_core::checksum::CrcKind;
use shoal_core::memory::MemoryStore;
use shoal_core::retry::RetryPolicy;
use shoal_core::{BucketStore, ByteRange, ErrorKind, Location, ObjectMeta, PutOptions, Store};
use shoal_testkit::wrap::{Fault, Method, Wrapped};
use shoal_transfer::ops::cloud_copy::copy_object;
use shoal_transfer::ops::download::{download_known, download_to_file};
use shoal_transfer::ops::stream::upload_stream;
use shoal_transfer::ops::upload::upload_file;
use shoal_transfer::{Run, TransferOptions, Verified};

fn data(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

async fn mem_with(key: &str, body: &[u8]) -> Arc<MemoryStore> {
    mem_put(key, body, &PutOptions::default()).await.0
}

/// A memory store holding `body` at `b/key`, and what the put returned.
async fn mem_put(key: &str, body: &[u8], opts: &PutOptions) -> (Arc<MemoryStore>, ObjectMeta) {
    let s = Arc::new(MemoryStore::new());
    s.create_bucket("b").await.unwrap();
    let meta = s
        .put("b", key, Bytes::copy_from_slice(body), opts)
        .await
        .unwrap();
    (s, meta)
}

fn small_slices() -> Run {
    Run::new(TransferOptions {
        workers: 4,
        min_slice: 1000,
        part_size: 1000,
        ..Default::default()
    })
}

#[tokio::test]
async fn download_exact_at_slice_boundaries() {
    let opts = small_slices();
    for size in [0usize, 1, 999, 1000, 1001, 3999, 4000, 4001, 123_457] {
        let body = data(size, size as u32);
        let store = mem_with("k", &body).await;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.bin");
        let r = download_to_file(
            store,
            &Location::parse("gs://b/k").unwrap(),
            &dest,
            &opts,
            &RetryPolicy::default(),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), body, "size {size}");
        assert_eq!(r.verified, Verified::Crc32c);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporaries left"
        );
    }
}

#[tokio::test]
async fn download_resumes_after_cut_streams() {
    let body = data(50_000, 7);
    let store = mem_with("k", &body).await;
    store.cut_streams_after(Some(3000));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let opts = Run::new(TransferOptions {
        workers: 2,
        min_slice: 10_000,
        ..Default::default()
    });
    download_to_file(
        store,
        &Location::parse("gs://b/k").unwrap(),
        &dest,
        &opts,
        &RetryPolicy::default(),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

/// A store that records the requests it serves and, when `corrupt`, flips
/// one byte of every GET body (the checksum must catch it).
fn spying(inner: Arc<MemoryStore>, corrupt: bool) -> Wrapped {
    let w = Wrapped::new(inner);
    if corrupt {
        w.fault(Method::Get, Fault::Corrupt)
    } else {
        w
    }
}

/// The ranges of the GETs `w` served, in the order they came.
fn gets(w: &Wrapped) -> Vec<ByteRange> {
    let calls = w.calls().into_iter();
    calls
        .filter(|c| c.method == Method::Get)
        .filter_map(|c| c.range)
        .collect()
}

#[tokio::test]
async fn corrupted_download_is_refused_and_nothing_written() {
    let body = data(10_000, 3);
    let store = Arc::new(spying(mem_with("k", &body).await, true));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    std::fs::write(&dest, b"previous contents").unwrap();
    let err = download_to_file(
        store,
        &Location::parse("gs://b/k").unwrap(),
        &dest,
        &small_slices(),
        &RetryPolicy::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Integrity);
    assert!(err.to_string().contains("CRC32C mismatch"), "{err}");
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        b"previous contents",
        "old file untouched"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "temporary removed"
    );
}

/// An object stored with only a CRC32 or CRC64NVME (S3's defaults today).
async fn mem_other(key: &str, body: &[u8], kind: CrcKind) -> Arc<MemoryStore> {
    let crc = kind.checksum(body);
    let opts = PutOptions {
        other_crc: Some(crc),
        ..Default::default()
    };
    let (s, meta) = mem_put(key, body, &opts).await;
    assert_eq!(
        (meta.checksums.crc32c(), meta.checksums.other_crc()),
        (None, Some(crc))
    );
    s
}

/// CRC32 and CRC64NVME are computed per slice and combined, like CRC32C;
/// named by a listing without checksums (S3's), the first GET asks for the
/// whole object so its headers tell which checksum to compute.
#[tokio::test]
async fn crc32_and_crc64nvme_are_checked_over_slices() {
    let url = Location::parse("s3://b/k").unwrap();
    for kind in [CrcKind::Crc32, CrcKind::Crc64Nvme] {
        let want: Verified = kind.into();
        for size in [1usize, 999, 1000, 4001, 123_457] {
            let body = data(size, size as u32 + 11);
            let store = mem_other("k", &body, kind).await;
            let spy = Arc::new(spying(store.clone(), false));
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("named");
            let r = download_to_file(spy, &url, &dest, &small_slices(), &RetryPolicy::default())
                .await
                .unwrap();
            assert_eq!(std::fs::read(&dest).unwrap(), body, "{kind:?} {size}");
            assert_eq!(r.verified, want, "{kind:?} {size}");

            // What an S3 listing says: size and ETag, no checksum.
            let listed = ObjectMeta {
                key: "k".into(),
                size: size as u64,
                version: store.head("b", "k").await.unwrap().version,
                ..Default::default()
            };
            let listed_to = |store: Arc<Wrapped>, dest: std::path::PathBuf| {
                let (url, listed) = (url.clone(), listed.clone());
                async move {
                    let opts = small_slices();
                    download_known(store, &url, &listed, &dest, &opts, &RetryPolicy::default())
                        .await
                }
            };
            let spy = Arc::new(spying(store.clone(), false));
            let dest = dir.path().join("listed");
            let r = listed_to(spy.clone(), dest.clone()).await.unwrap();
            assert_eq!(
                std::fs::read(&dest).unwrap(),
                body,
                "{kind:?} {size} listed"
            );
            assert_eq!(r.verified, want, "{kind:?} {size} listed");
            assert_eq!(gets(&spy)[0], ByteRange::from(0));
            assert_eq!(spy.count(Method::Head), 0);

            // Flipped on the way: refused, named, nothing left.
            let bad = Arc::new(spying(store, true));
            let dest = dir.path().join("bad");
            let e = listed_to(bad, dest.clone()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
            assert!(
                e.to_string().contains(&format!("{} mismatch", kind.name())),
                "{e}"
            );
            assert!(!dest.exists());
            assert_eq!(
                std::fs::read_dir(dir.path()).unwrap().count(),
                2,
                "no temporaries"
            );
        }
    }
}

/// Named without a size, an object costs one request per slice: the first
/// GET (of the whole object, cut after the first slice) stands in for a
/// HEAD. Only a download with slices left to resume starts with a HEAD.
#[tokio::test]
async fn the_first_get_stands_in_for_a_head() {
    let url = Location::parse("gs://b/k").unwrap();
    for (size, want) in [
        (500usize, vec![ByteRange::from(0)]),
        (
            4000,
            vec![
                ByteRange::from(0),
                ByteRange::new(1000, 2000),
                ByteRange::new(2000, 3000),
                ByteRange::new(3000, 4000),
            ],
        ),
    ] {
        let body = data(size, 5);
        let store = Arc::new(spying(mem_with("k", &body).await, false));
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        let r = download_to_file(
            store.clone(),
            &url,
            &dest,
            &small_slices(),
            &RetryPolicy::default(),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), body, "size {size}");
        assert_eq!(r.verified, Verified::Crc32c);
        assert_eq!(store.count(Method::Head), 0);
        let mut gets = gets(&store);
        gets.sort_by_key(|r| (r.start, r.end));
        assert_eq!(gets, want, "size {size}");
    }

    // Slices 0 and 2 of four survive an interrupted run: the rerun learns
    // the object from a HEAD and fetches only slices 1 and 3.
    let body = data(4000, 6);
    let store = Arc::new(spying(mem_with("k", &body).await, false));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let meta = store.head("b", "k").await.unwrap();
    let slices = [(0u64, 1000u64), (1000, 2000), (2000, 3000), (3000, 4000)];
    let data_name = ".out.shoal-partial-0123456789abcdef0123456789abcdef";
    let mut partial = body.clone();
    partial[1000..2000].fill(0);
    partial[3000..].fill(0);
    std::fs::write(dir.path().join(data_name), &partial).unwrap();
    let md = std::fs::metadata(dir.path().join(data_name)).unwrap();
    use std::os::unix::fs::MetadataExt;
    let header = serde_json::json!({
        "shoal_partial": 2, "url": "gs://b/k", "size": 4000,
        "version": meta.version.as_ref().map(|v| v.to_string()), "slices": slices,
        "data": data_name, "dev": md.dev(), "ino": md.ino(),
    });
    let done = |i: usize| {
        let (a, b) = slices[i];
        serde_json::json!({"slice": i, "crc32c": crc32c::crc32c(&body[a as usize..b as usize])})
    };
    std::fs::write(
        dir.path().join(".out.shoal-partial.json"),
        format!("{header}\n{}\n{}\n", done(0), done(2)),
    )
    .unwrap();
    store.clear();
    let r = download_to_file(
        store.clone(),
        &url,
        &dest,
        &small_slices(),
        &RetryPolicy::default(),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert_eq!(r.resumed, 2000);
    assert_eq!(store.count(Method::Head), 1);
    let mut gets = gets(&store);
    gets.sort_by_key(|r| (r.start, r.end));
    assert_eq!(
        gets,
        vec![ByteRange::new(1000, 2000), ByteRange::new(3000, 4000)]
    );
}

/// A file where the destination's folder must be fails before any byte
/// is fetched (missing folders are made when the file is written).
#[tokio::test]
async fn a_file_in_the_way_of_the_destination_fails_before_download() {
    let store = mem_with("k", b"abc").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let err = download_to_file(
        store,
        &Location::parse("gs://b/k").unwrap(),
        &dir.path().join("f/deeper/x"),
        &small_slices(),
        &RetryPolicy::default(),
    )
    .await
    .unwrap_err();
    let e = err.to_string();
    assert!(
        e.contains("not a directory") || e.contains("not a folder"),
        "{e}"
    );
}

#[tokio::test]
async fn multipart_upload_round_trip_and_abort_on_failure() {
    let store = Arc::new(MemoryStore::new());
    store.create_bucket("b").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let body = data(10_500, 11);
    std::fs::write(&src, &body).unwrap();
    let dst = Location::parse("gs://b/up").unwrap();
    let r = upload_file(store.clone(), &src, &dst, &small_slices())
        .await
        .unwrap();
    assert_eq!(r.pieces, 11);
    let got = store
        .get("b", "up", ByteRange::from(0), None)
        .await
        .unwrap();
    use futures::TryStreamExt;
    let bytes: Vec<Bytes> = got.body.try_collect().await.unwrap();
    assert_eq!(bytes.concat(), body);

    // A non-retryable failure mid-way aborts the upload; the object is not created.
    store.fail_next(&[ErrorKind::PermissionDenied]);
    let dst2 = Location::parse("gs://b/up2").unwrap();
    let err = upload_file(store.clone(), &src, &dst2, &small_slices())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert_eq!(
        store.head("b", "up2").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[tokio::test]
async fn stream_upload_small_and_large_and_copy() {
    let store = Arc::new(MemoryStore::new());
    store.create_bucket("b").await.unwrap();
    for size in [0usize, 5, 999, 1000, 1001, 7777] {
        let body = data(size, 5);
        let chunks: Vec<shoal_core::Result<Bytes>> = body
            .chunks(333)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let dst = Location::parse(&format!("gs://b/s{size}")).unwrap();
        let r = upload_stream(
            store.clone(),
            Box::pin(futures::stream::iter(chunks)),
            &dst,
            &PutOptions::default(),
            &small_slices(),
        )
        .await
        .unwrap();
        assert_eq!(r.bytes as usize, size);
        assert_eq!(
            store.head("b", &dst.key).await.unwrap().checksums.crc32c(),
            Some(crc32c::crc32c(&body))
        );

        let copy = Location::parse(&format!("gs://b/c{size}")).unwrap();
        let r = copy_object(
            store.clone(),
            &dst,
            store.clone(),
            &copy,
            &small_slices(),
            &RetryPolicy::default(),
        )
        .await
        .unwrap();
        assert_eq!(r.verified, Verified::Crc32c);
        assert_eq!(
            store.head("b", &copy.key).await.unwrap().checksums.crc32c(),
            Some(crc32c::crc32c(&body))
        );
    }
}

/// Runs `actions` as one batch on `s`; every action must succeed.
async fn run_batch(
    s: Arc<MemoryStore>,
    actions: Vec<shoal_transfer::ops::Action>,
    opts: TransferOptions,
) {
    use shoal_transfer::ops::{self, BatchCounters};
    let store_for: ops::StoreFor = Arc::new(move |_: &Location| Ok(s.clone() as Arc<dyn Store>));
    let report = ops::run(
        futures::StreamExt::boxed(futures::stream::iter(
            actions.into_iter().map(|a| Ok(shoal_core::Seen::Item(a))),
        )),
        store_for,
        Run::new(opts),
        RetryPolicy::default(),
        Arc::new(BatchCounters::default()),
        ops::Mode::default(),
    )
    .await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// `n` local files of `size` bytes (file `i` filled with byte `i`) named
/// `{tag}{i}` in `dir`, each as a copy to `dst(i)`, named without a size.
fn file_uploads(
    dir: &std::path::Path,
    tag: &str,
    n: usize,
    size: usize,
    dst: impl Fn(usize) -> Location,
) -> Vec<shoal_transfer::ops::Action> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("{tag}{i}"));
            std::fs::write(&p, vec![i as u8; size]).unwrap();
            shoal_transfer::ops::Action::Copy {
                src: Location::parse(p.to_str().unwrap()).unwrap(),
                meta: None,
                dst: dst(i),
            }
        })
        .collect()
}

/// A batch keeps `small_workers` cheap requests in flight (small
/// downloads, small uploads, deletes), while slices and parts of big files
/// stay within `workers`: on a store with a 10 ms round trip, the peak of
/// requests answering at once is exactly each limit.
#[tokio::test(start_paused = true)]
async fn a_batch_keeps_small_requests_wide_and_big_ones_within_workers() {
    use shoal_transfer::ops::Action;
    let mib = 1u64 << 20;
    let opts = || TransferOptions {
        workers: 3,
        small_workers: 24,
        min_slice: mib,
        part_size: mib,
        ..Default::default()
    };
    let run = |s: Arc<MemoryStore>, actions: Vec<Action>| run_batch(s, actions, opts());
    let dir = tempfile::tempdir().unwrap();
    let key = |i: usize| Location::parse(&format!("gs://b/s/{i}")).unwrap();

    // 100 small objects down: 24 GETs at once.
    // `n` objects s/0.. of `size` bytes (byte i), answering after 10 ms,
    // and their downloads to `{prefix}{i}` in the temporary folder.
    let seeded = |n: usize, size: usize, prefix: &'static str| {
        let dir = dir.path().to_owned();
        async move {
            let s = Arc::new(MemoryStore::new());
            s.create_bucket("b").await.unwrap();
            for i in 0..n {
                let body = Bytes::from(vec![i as u8; size]);
                s.put("b", &format!("s/{i}"), body, &PutOptions::default())
                    .await
                    .unwrap();
            }
            s.set_latency(std::time::Duration::from_millis(10));
            let downloads: Vec<Action> = (0..n)
                .map(|i| Action::Copy {
                    src: key(i),
                    meta: None,
                    dst: Location::parse(dir.join(format!("{prefix}{i}")).to_str().unwrap())
                        .unwrap(),
                })
                .collect();
            (s, downloads)
        }
    };

    let (s, down) = seeded(100, 1000, "d").await;
    run(s.clone(), down).await;
    assert_eq!(s.peak_in_flight(), 24);
    assert_eq!(
        std::fs::read(dir.path().join("d7")).unwrap(),
        vec![7u8; 1000]
    );

    // Their deletes: 24 at once as well.
    let s2 = s.clone();
    let deletes = (0..100)
        .map(|i| Action::Delete {
            dst: key(i),
            version: None,
        })
        .collect();
    run(s2, deletes).await;
    assert_eq!(s.peak_in_flight(), 24);

    // 100 small files up, named without a size (as Python's upload_many
    // names them): one stat each tells they are one-request uploads, so
    // 24 at once too.
    let s = Arc::new(MemoryStore::new());
    s.create_bucket("b").await.unwrap();
    s.set_latency(std::time::Duration::from_millis(10));
    let ups = file_uploads(dir.path(), "u", 100, 1000, key);
    run(s.clone(), ups).await;
    assert_eq!(s.peak_in_flight(), 24);

    // Two 8 MiB objects: 16 slices, at most 3 at once.
    let (s, big) = seeded(2, 8 << 20, "b").await;
    run(s.clone(), big).await;
    assert_eq!(s.peak_in_flight(), 3);
    assert_eq!(
        std::fs::metadata(dir.path().join("b1")).unwrap().len(),
        8 << 20
    );
}

/// The cheap requests of a batch share a memory budget as well as their
/// slots: 200 tiny files fill all 150 slots, while 200 files of 1 MiB
/// (each a whole buffer up, a write batch down) stop at the 64 that
/// `SMALL_MEMORY` holds, however many slots there are.
#[tokio::test(start_paused = true)]
async fn small_requests_in_flight_are_bounded_by_their_buffers_too() {
    use shoal_transfer::ops::Action;
    use shoal_transfer::{MEMORY_UNIT, SMALL_MEMORY, WRITE_BUFFER_UNITS};
    let by_memory = (SMALL_MEMORY / MEMORY_UNIT) as usize / WRITE_BUFFER_UNITS as usize;
    assert_eq!(by_memory, 64);
    let dir = tempfile::tempdir().unwrap();
    let opts = || TransferOptions {
        workers: 3,
        small_workers: 150,
        ..Default::default()
    };
    for (size, peak) in [(16usize << 10, 150), (1 << 20, by_memory)] {
        let s = Arc::new(MemoryStore::new());
        s.create_bucket("b").await.unwrap();
        s.set_latency(std::time::Duration::from_millis(10));
        let ups = file_uploads(dir.path(), &format!("u{size}-"), 200, size, |i| {
            Location::parse(&format!("gs://b/{i}")).unwrap()
        });
        run_batch(s.clone(), ups, opts()).await;
        assert_eq!(s.peak_in_flight(), peak, "uploads of {size} B");

        // Down again, sizes known (as a listing gives them).
        let s = Arc::new(MemoryStore::new());
        s.create_bucket("b").await.unwrap();
        let mut metas = Vec::new();
        for i in 0..200 {
            let key = format!("{i}");
            let body = Bytes::from(vec![i as u8; size]);
            s.put("b", &key, body, &PutOptions::default())
                .await
                .unwrap();
            metas.push(s.head("b", &key).await.unwrap());
        }
        s.set_latency(std::time::Duration::from_millis(10));
        let downs = metas
            .into_iter()
            .map(|m| Action::Copy {
                src: Location::parse(&format!("gs://b/{}", m.key)).unwrap(),
                dst: Location::parse(
                    dir.path()
                        .join(format!("d{size}-{}", m.key))
                        .to_str()
                        .unwrap(),
                )
                .unwrap(),
                meta: Some(m),
            })
            .collect();
        run_batch(s.clone(), downs, opts()).await;
        assert_eq!(s.peak_in_flight(), peak, "downloads of {size} B");
    }
}

/// A batch's delete of something already gone is done, not failed: the
/// object is absent either way (GCS answers 404, S3 204; a local file may
/// have been removed since it was listed).
#[tokio::test]
async fn deleting_what_is_already_gone_succeeds() {
    use shoal_transfer::ops::Action;
    let s = Arc::new(MemoryStore::new());
    s.create_bucket("b").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let actions = vec![
        Action::Delete {
            dst: Location::parse("gs://b/never-there").unwrap(),
            version: None,
        },
        Action::Delete {
            dst: Location::parse(dir.path().join("gone").to_str().unwrap()).unwrap(),
            version: None,
        },
    ];
    run_batch(s, actions, TransferOptions::default()).await;
}

/// Runs `actions` in `mode` on `s`, returning the report.
async fn run_mode(
    s: Arc<MemoryStore>,
    actions: Vec<shoal_transfer::ops::Action>,
    mode: shoal_transfer::ops::Mode,
) -> shoal_transfer::ops::BatchReport {
    use shoal_transfer::ops::{self, BatchCounters};
    let store_for: ops::StoreFor = Arc::new(move |_: &Location| Ok(s.clone() as Arc<dyn Store>));
    ops::run(
        futures::StreamExt::boxed(futures::stream::iter(
            actions.into_iter().map(|a| Ok(shoal_core::Seen::Item(a))),
        )),
        store_for,
        Run::new(TransferOptions::default()),
        RetryPolicy::default(),
        Arc::new(BatchCounters::default()),
        mode,
    )
    .await
}

/// `sync --delete` holds its deletes back after a failed copy of the same
/// run (the copy may be the only other home of what the delete removes);
/// `--ignore-errors` deletes anyway; a run without failures deletes.
#[tokio::test]
async fn deletes_are_held_back_after_a_failed_copy() {
    use shoal_transfer::ops::{Action, Mode};
    let l = |s: &str| Location::parse(s).unwrap();
    let plan = |missing: bool| {
        vec![
            Action::Copy {
                src: l(if missing {
                    "gs://b/missing"
                } else {
                    "gs://b/src"
                }),
                meta: None,
                dst: l("gs://b/dst/renamed"),
            },
            Action::Delete {
                dst: l("gs://b/dst/old-name"),
                version: None,
            },
        ]
    };
    let store = || async {
        let s = mem_with("src", b"hello").await;
        s.put(
            "b",
            "dst/old-name",
            Bytes::from_static(b"hello"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        s
    };
    let held = Mode {
        moving: false,
        hold_deletes: true,
    };
    // A copy fails: nothing deleted, and the report says why.
    let s = store().await;
    let r = run_mode(s.clone(), plan(true), held).await;
    assert_eq!((r.deleted, r.failed), (0, 2), "{:?}", r.failures);
    assert!(
        r.failures[1].contains("1 extra not deleted: 1 transfer failed"),
        "{:?}",
        r.failures
    );
    assert!(s.head("b", "dst/old-name").await.is_ok());
    // --ignore-errors: the delete runs.
    let s = store().await;
    let r = run_mode(s.clone(), plan(true), Mode::default()).await;
    assert_eq!((r.deleted, r.failed), (1, 1), "{:?}", r.failures);
    assert!(s.head("b", "dst/old-name").await.is_err());
    // No failure: copied, then deleted.
    let s = store().await;
    let r = run_mode(s.clone(), plan(false), held).await;
    assert_eq!(
        (r.copied, r.deleted, r.failed),
        (1, 1, 0),
        "{:?}",
        r.failures
    );
    assert!(s.head("b", "dst/old-name").await.is_err());
}

/// A move deletes its source only at the version it copied: a version
/// written meanwhile is kept (and said), one already gone is done.
#[tokio::test]
async fn a_move_deletes_only_the_version_it_copied() {
    use shoal_transfer::ops::delete_moved;
    use shoal_transfer::ops::{Action, Mode};
    let s = mem_with("a", b"first").await;
    let copied = s.head("b", "a").await.unwrap().version.unwrap();
    s.put(
        "b",
        "a",
        Bytes::from_static(b"second"),
        &PutOptions::default(),
    )
    .await
    .unwrap();
    let store = s.clone();
    let store_for: shoal_core::StoreFor =
        Arc::new(move |_: &Location| Ok(store.clone() as Arc<dyn Store>));
    let src = Location::parse("gs://b/a").unwrap();
    let e = delete_moved(&src, Some(&copied), None, &store_for)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
    assert!(e.to_string().contains("the source was kept"), "{e}");
    assert!(s.head("b", "a").await.is_ok());
    // At the version copied: deleted; then already gone: done.
    let now = s.head("b", "a").await.unwrap().version.unwrap();
    delete_moved(&src, Some(&now), None, &store_for)
        .await
        .unwrap();
    assert!(s.head("b", "a").await.is_err());
    delete_moved(&src, Some(&now), None, &store_for)
        .await
        .unwrap();

    // A whole move through the batch: copied, then the source is gone.
    let s = mem_with("m", b"move me").await;
    let moved = Mode {
        moving: true,
        hold_deletes: false,
    };
    let plan = vec![Action::Copy {
        src: Location::parse("gs://b/m").unwrap(),
        meta: None,
        dst: Location::parse("gs://b/n").unwrap(),
    }];
    let r = run_mode(s.clone(), plan, moved).await;
    assert_eq!((r.copied, r.failed), (1, 0), "{:?}", r.failures);
    assert!(s.head("b", "m").await.is_err());
    assert!(s.head("b", "n").await.is_ok());
}

/// A local source that changed after its copy began is kept.
#[tokio::test]
async fn a_move_keeps_a_local_file_written_meanwhile() {
    use shoal_transfer::ops::{LocalStamp, delete_moved};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, b"one").unwrap();
    let src = Location::parse(p.to_str().unwrap()).unwrap();
    let stamp = LocalStamp::of(&src).unwrap();
    std::fs::write(&p, b"one and more").unwrap();
    let s = Arc::new(MemoryStore::new());
    let store_for: shoal_core::StoreFor =
        Arc::new(move |_: &Location| Ok(s.clone() as Arc<dyn Store>));
    let e = delete_moved(&src, None, stamp, &store_for)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
    assert!(p.exists());
    let stamp = LocalStamp::of(&src).unwrap();
    delete_moved(&src, None, stamp, &store_for).await.unwrap();
    assert!(!p.exists());
}
