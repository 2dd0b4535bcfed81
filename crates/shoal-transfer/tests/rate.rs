//! `--rate-limit` and `--max-requests-per-sec` through the engines, on the
//! in-memory store and tokio's paused clock: time moves only when every
//! task sleeps, so elapsed time is what the limits imposed, exactly, and
//! no assertion depends on how fast the machine is.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use shoal_core::memory::MemoryStore;
use shoal_core::retry::RetryPolicy;
use shoal_core::{BucketStore, Location, PutOptions, Store};
use shoal_transfer::ops::cloud_copy::copy_object;
use shoal_transfer::ops::download::download_to_file;
use shoal_transfer::ops::rate::Rates;
use shoal_transfer::ops::upload::upload_file;
use shoal_transfer::ops::{self, Action, BatchCounters, StoreFor};
use shoal_transfer::{Run, TransferOptions};
use tokio::time::Instant;

const MIB: u64 = 1 << 20;

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

async fn mem() -> Arc<MemoryStore> {
    let s = Arc::new(MemoryStore::new());
    s.create_bucket("b").await.unwrap();
    s
}

async fn put(s: &MemoryStore, key: &str, body: Vec<u8>) {
    s.put("b", key, Bytes::from(body), &PutOptions::default())
        .await
        .unwrap();
}

fn settings() -> TransferOptions {
    TransferOptions {
        workers: 4,
        min_slice: MIB,
        part_size: MIB,
        ..Default::default()
    }
}

fn limited(bytes: Option<u64>, requests: Option<u64>) -> Run {
    limited_with(settings(), bytes, requests)
}

fn limited_with(opts: TransferOptions, bytes: Option<u64>, requests: Option<u64>) -> Run {
    Run::new(opts).with_rates(Rates::new(bytes, requests))
}

fn store_for(store: Arc<MemoryStore>) -> StoreFor {
    Arc::new(move |_: &Location| Ok(store.clone() as Arc<dyn Store>))
}

fn assert_about(took: Duration, want: Duration) {
    // One 64 KiB chunk of slack at 1 MiB/s is 62.5 ms.
    assert!(
        took >= want && took < want + Duration::from_millis(100),
        "took {took:?}, want {want:?}"
    );
}

/// A big slice is paced chunk by chunk, not charged in one lump: progress
/// sampled mid-way sits on the rate line (a tenth of a second's burst + 1
/// MiB/s).
#[tokio::test(start_paused = true)]
async fn one_slice_download_is_paced_smoothly() {
    let s = mem().await;
    let body = data(4 * MIB as usize, 1);
    put(&s, "k", body.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let progress = Arc::new(AtomicU64::new(0));
    let one_slice = TransferOptions {
        slices: Some(1),
        ..settings()
    };
    let run = limited_with(one_slice, Some(MIB), None).with_progress(progress.clone());
    let t0 = Instant::now();
    let task = {
        let dest = dest.clone();
        tokio::spawn(async move {
            download_to_file(
                s,
                &Location::parse("gs://b/k").unwrap(),
                &dest,
                &run,
                &RetryPolicy::default(),
            )
            .await
        })
    };
    for half_secs in [1u64, 3, 5] {
        tokio::time::sleep_until(t0 + Duration::from_millis(500 * half_secs)).await;
        let want = MIB / 10 + MIB * half_secs / 2;
        let got = progress.load(Ordering::Relaxed);
        assert!(
            got.abs_diff(want) <= 128 << 10,
            "at {} ms: {got} bytes, want about {want}",
            500 * half_secs
        );
    }
    task.await.unwrap().unwrap();
    assert_about(t0.elapsed(), Duration::from_millis(3900));
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

/// Slices on parallel connections share one rate: 4 MiB in 4 slices at
/// 1 MiB/s takes as long as one stream would.
#[tokio::test(start_paused = true)]
async fn parallel_slices_share_the_rate() {
    let s = mem().await;
    let body = data(4 * MIB as usize, 2);
    put(&s, "k", body.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    let t0 = Instant::now();
    let r = download_to_file(
        s,
        &Location::parse("gs://b/k").unwrap(),
        &dest,
        &limited(Some(MIB), None),
        &RetryPolicy::default(),
    )
    .await
    .unwrap();
    assert_eq!(r.pieces, 4);
    assert_about(t0.elapsed(), Duration::from_millis(3900));
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

/// Uploads: each part is charged before it is sent; the multipart start
/// and complete count as requests.
#[tokio::test(start_paused = true)]
async fn multipart_upload_is_paced_by_bytes_and_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let body = data(5 * MIB as usize, 3);
    std::fs::write(&path, &body).unwrap();
    let dst = Location::parse("gs://b/up").unwrap();

    let s = mem().await;
    let t0 = Instant::now();
    let r = upload_file(s.clone(), &path, &dst, &limited(Some(MIB), None))
        .await
        .unwrap();
    assert_eq!(r.pieces, 5);
    assert_about(t0.elapsed(), Duration::from_millis(4900));

    // 7 requests (start, 5 parts, complete) at 2/s, the first at once: the
    // last at 3 s.
    let s = mem().await;
    let t0 = Instant::now();
    upload_file(s.clone(), &path, &dst, &limited(None, Some(2)))
        .await
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(3000));
    let got = s.head("b", "up").await.unwrap();
    assert_eq!(got.size, body.len() as u64);
}

/// A cloud-to-cloud copy streamed through the client is charged once (on
/// its upload side), not once for the read and again for the write. (Within
/// one store the server copies unless told not to: nothing to charge.)
#[tokio::test(start_paused = true)]
async fn cloud_to_cloud_is_charged_once() {
    let s = mem().await;
    put(&s, "src", data(3 * MIB as usize, 4)).await;
    let t0 = Instant::now();
    copy_object(
        s.clone(),
        &Location::parse("gs://b/src").unwrap(),
        s.clone(),
        &Location::parse("gs://b/dst").unwrap(),
        &limited_with(
            TransferOptions {
                server_side: false,
                ..settings()
            },
            Some(MIB),
            None,
        ),
        &RetryPolicy::default(),
    )
    .await
    .unwrap();
    assert_about(t0.elapsed(), Duration::from_millis(2900));
}

fn copies(keys: std::ops::Range<usize>, dir: &std::path::Path) -> Vec<Action> {
    keys.map(|i| Action::Copy {
        src: Location::parse(&format!("gs://b/f{i}")).unwrap(),
        meta: None,
        dst: Location::parse(dir.join(format!("f{i}")).to_str().unwrap()).unwrap(),
    })
    .collect()
}

async fn run_batch(s: &Arc<MemoryStore>, actions: Vec<Action>, run: Run) {
    let stream =
        futures::stream::iter(actions.into_iter().map(|a| Ok(shoal_core::Seen::Item(a)))).boxed();
    let report = ops::run(
        stream,
        store_for(s.clone()),
        run,
        RetryPolicy::default(),
        Arc::new(BatchCounters::default()),
        ops::Mode::default(),
    )
    .await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// A batch of small files shares the command's byte rate and request
/// rate (each file here, named without a size, is one GET); without limits the same
/// batch spends no time at all waiting.
#[tokio::test(start_paused = true)]
async fn a_batch_shares_one_byte_rate_and_one_request_rate() {
    let s = mem().await;
    for i in 0..24 {
        put(&s, &format!("f{i}"), data(128 << 10, i as u8)).await;
    }
    let dir = tempfile::tempdir().unwrap();

    // 24 × 128 KiB = 3 MiB at 1 MiB/s.
    let t0 = Instant::now();
    run_batch(&s, copies(0..24, dir.path()), limited(Some(MIB), None)).await;
    assert_about(t0.elapsed(), Duration::from_millis(2900));

    // 24 requests at 8/s, the first at once: the last starts at 2.875 s.
    let t0 = Instant::now();
    run_batch(&s, copies(0..24, dir.path()), limited(None, Some(8))).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(2875));

    // Deletes draw from the request rate too: 16 at 8/s.
    let deletes = (0..16)
        .map(|i| Action::Delete {
            dst: Location::parse(&format!("gs://b/f{i}")).unwrap(),
            version: None,
        })
        .collect();
    let t0 = Instant::now();
    run_batch(&s, deletes, limited(None, Some(8))).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(1875));

    let t0 = Instant::now();
    run_batch(&s, copies(16..24, dir.path()), limited(None, None)).await;
    assert_eq!(t0.elapsed(), Duration::ZERO);
}
