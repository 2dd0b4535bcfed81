//! The conformance suite: what every backend must do the same way.
//!
//! Each case takes a [`Target`] (a store and a fresh bucket) and panics with
//! a message naming the case on failure. `tests/conformance.rs` runs every
//! case against memory, local, fake-gcs-server and MinIO. Where a server
//! cannot do something, the gap is a [`crate::Quirks`] flag, not a silent
//! skip.

use bytes::Bytes;
use futures::TryStreamExt;
use shoal_core::paginate::pages;
use shoal_core::{ByteRange, ErrorKind, ListRequest, ObjectVersion, PutOptions};

use crate::Target;

fn data(n: usize, seed: u64) -> Bytes {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Bytes::from(
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>(),
    )
}

async fn get_all(t: &Target, key: &str, range: ByteRange) -> Vec<u8> {
    let r = t
        .store
        .get(&t.bucket, key, range, None)
        .await
        .unwrap_or_else(|e| panic!("get {key}: {e}"));
    let chunks: Vec<Bytes> = r
        .body
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("read {key}: {e}"));
    chunks.concat()
}

async fn put(t: &Target, key: &str, body: Bytes) {
    t.store
        .put(&t.bucket, key, body, &PutOptions::default())
        .await
        .unwrap_or_else(|e| panic!("put {key:?}: {e}"));
}

async fn list_keys(t: &Target, mut req: ListRequest) -> (Vec<String>, Vec<String>) {
    if req.max_results.is_none() {
        req.max_results = Some(1000);
    }
    let pages: Vec<_> = pages(t.store.clone(), t.bucket.clone(), req)
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("list: {e}"));
    let mut objs = Vec::new();
    let mut prefixes = Vec::new();
    for p in pages {
        objs.extend(p.objects.into_iter().map(|o| o.key));
        prefixes.extend(p.prefixes);
    }
    (objs, prefixes)
}

/// Whole objects of several sizes come back byte for byte, with metadata.
pub async fn put_head_get_round_trip(t: &Target) {
    for (i, size) in [0usize, 1, 1000, 300_000].into_iter().enumerate() {
        let key = format!("rt/{size}");
        let body = data(size, i as u64);
        let meta = t
            .store
            .put(&t.bucket, &key, body.clone(), &PutOptions::default())
            .await
            .unwrap();
        assert_eq!(meta.size, size as u64, "put reports size");
        let head = t.store.head(&t.bucket, &key).await.unwrap();
        assert_eq!(head.key, key);
        assert_eq!(head.size, size as u64);
        if !t.quirks.no_stored_crc32c {
            assert_eq!(
                head.crc32c,
                Some(crc32c::crc32c(&body)),
                "stored CRC32C of {key}"
            );
        }
        assert!(
            head.version.is_some(),
            "a version token (generation or ETag)"
        );
        assert_eq!(
            get_all(t, &key, ByteRange::from(0)).await,
            body.as_ref(),
            "body of {key}"
        );
    }
}

/// Ranged reads return exactly the bytes asked for, and the whole size.
pub async fn ranged_get(t: &Target) {
    let body = data(100_000, 9);
    put(t, "ranged", body.clone()).await;
    for (s, e) in [
        (0u64, 1u64),
        (10, 20),
        (99_999, 100_000),
        (0, 100_000),
        (4096, 65_536),
    ] {
        let r = t
            .store
            .get(&t.bucket, "ranged", ByteRange::new(s, e), None)
            .await
            .unwrap();
        assert_eq!(r.meta.size, 100_000, "whole size from a ranged read");
        assert_eq!(r.range, ByteRange::new(s, e));
        let got: Vec<Bytes> = r.body.try_collect().await.unwrap();
        assert_eq!(
            got.concat(),
            &body[s as usize..e as usize],
            "range {s}..{e}"
        );
    }
    assert_eq!(
        get_all(t, "ranged", ByteRange::from(99_990)).await,
        &body[99_990..]
    );
}

/// Keys are opaque: odd characters survive put, list, head and get.
pub async fn opaque_keys(t: &Target) {
    let mut keys: Vec<&str> = vec![
        "sp ace",
        "ünï/cødé",
        "100%",
        "100%25",
        "a+b",
        "q?x#y&z=1",
        "tilde~",
        "semi;colon",
        "star*[x]",
        "em😀ji",
    ];
    if !t.quirks.no_trailing_slash_keys {
        keys.push("folder-marker/");
    }
    if !t.quirks.no_empty_or_dot_segments {
        keys.extend(["a//b", "x/./y", "x/../y"]);
    }
    for (i, k) in keys.iter().enumerate() {
        put(t, k, data(10 + i, i as u64)).await;
    }
    let (listed, _) = list_keys(t, ListRequest::default()).await;
    let mut want: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        listed, want,
        "listing returns every key verbatim, in byte order"
    );
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            t.store
                .head(&t.bucket, k)
                .await
                .unwrap_or_else(|e| panic!("head {k:?}: {e}"))
                .key,
            *k
        );
        assert_eq!(
            get_all(t, k, ByteRange::from(0)).await,
            data(10 + i, i as u64).as_ref(),
            "body of {k:?}"
        );
    }
}

/// Prefix and delimiter listings group keys into common prefixes.
pub async fn list_prefix_delimiter(t: &Target) {
    for k in ["a/1", "a/2", "a/b/3", "b/4", "c", "ca"] {
        put(t, k, data(3, 1)).await;
    }
    let (objs, prefixes) = list_keys(
        t,
        ListRequest {
            delimiter: Some("/".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(objs, ["c", "ca"]);
    assert_eq!(prefixes, ["a/", "b/"]);
    let (objs, prefixes) = list_keys(
        t,
        ListRequest {
            prefix: "a/".into(),
            delimiter: Some("/".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(objs, ["a/1", "a/2"]);
    assert_eq!(prefixes, ["a/b/"]);
    let (objs, _) = list_keys(
        t,
        ListRequest {
            prefix: "a/".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(objs, ["a/1", "a/2", "a/b/3"]);
    let (objs, prefixes) = list_keys(
        t,
        ListRequest {
            prefix: "zzz".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(objs.is_empty() && prefixes.is_empty());
}

/// Small pages chain through tokens without losing or repeating keys.
pub async fn list_paging(t: &Target) {
    let keys: Vec<String> = (0..7).map(|i| format!("p/{i:02}")).collect();
    for k in &keys {
        put(t, k, data(1, 2)).await;
    }
    let (objs, _) = list_keys(
        t,
        ListRequest {
            prefix: "p/".into(),
            max_results: Some(2),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(objs, keys);
}

/// `start_offset` is inclusive and `end_offset` exclusive, on every backend.
pub async fn list_offsets(t: &Target) {
    for k in ["k0", "k1", "k2", "k3", "k4"] {
        put(t, k, data(1, 3)).await;
    }
    let req = ListRequest {
        start_offset: Some("k1".into()),
        end_offset: Some("k3".into()),
        ..Default::default()
    };
    assert_eq!(list_keys(t, req).await.0, ["k1", "k2"]);
    let req = ListRequest {
        start_offset: Some("k10".into()),
        ..Default::default()
    };
    assert_eq!(list_keys(t, req).await.0, ["k2", "k3", "k4"]);
    let req = ListRequest {
        end_offset: Some("k0".into()),
        ..Default::default()
    };
    assert!(list_keys(t, req).await.0.is_empty());
    let req = ListRequest {
        start_offset: Some("k1".into()),
        end_offset: Some("k4".into()),
        max_results: Some(1),
        ..Default::default()
    };
    assert_eq!(list_keys(t, req).await.0, ["k1", "k2", "k3"]);
}

/// Missing objects and buckets are `NotFound`, whatever the operation.
pub async fn not_found(t: &Target) {
    let s = &t.store;
    assert_eq!(
        s.head(&t.bucket, "missing").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        s.get(&t.bucket, "missing", ByteRange::from(0), None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let nb = crate::unique_bucket("nobucket");
    assert_eq!(
        s.head(&nb, "k").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        s.list_page(&nb, &ListRequest::default())
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let e = s.head(&t.bucket, "missing").await.unwrap_err().to_string();
    assert!(!e.contains('\n'), "one line: {e}");
}

/// A declared checksum that does not match the data is refused.
pub async fn wrong_checksum_refused(t: &Target) {
    let body = data(1000, 4);
    let opts = PutOptions {
        crc32c: Some(crc32c::crc32c(&body) ^ 1),
        ..Default::default()
    };
    if t.quirks.unchecked_checksums {
        // moto stores it; its answer echoes the value sent, so shoal's
        // upload claims it (nothing more can be known from the answer).
        t.store
            .put(&t.bucket, "bad-crc", body, &opts)
            .await
            .unwrap();
        return;
    }
    let err = t
        .store
        .put(&t.bucket, "bad-crc", body, &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Integrity | ErrorKind::Rejected),
        "wrong CRC32C must be refused, got {:?}: {err}",
        err.kind()
    );
    assert_eq!(
        t.store.head(&t.bucket, "bad-crc").await.unwrap_err().kind(),
        ErrorKind::NotFound,
        "nothing written"
    );
}

/// `if_not_exists` refuses to overwrite.
pub async fn if_not_exists(t: &Target) {
    let opts = PutOptions {
        if_not_exists: true,
        ..Default::default()
    };
    t.store
        .put(&t.bucket, "once", data(5, 5), &opts)
        .await
        .unwrap();
    let err = t
        .store
        .put(&t.bucket, "once", data(5, 6), &opts)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Precondition, "{err}");
    assert_eq!(
        get_all(t, "once", ByteRange::from(0)).await,
        data(5, 5).as_ref()
    );
}

/// A read pinned to an old version fails instead of mixing versions.
pub async fn version_pinning(t: &Target) {
    put(t, "ver", data(100, 1)).await;
    let v1: ObjectVersion = t
        .store
        .head(&t.bucket, "ver")
        .await
        .unwrap()
        .version
        .expect("version");
    // Local stores version by mtime+size: make the new version differ in size.
    put(t, "ver", data(101, 2)).await;
    let err = t
        .store
        .get(&t.bucket, "ver", ByteRange::from(0), Some(&v1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Changed | ErrorKind::NotFound | ErrorKind::Precondition
        ),
        "{err}"
    );
    let v2 = t
        .store
        .head(&t.bucket, "ver")
        .await
        .unwrap()
        .version
        .unwrap();
    assert_eq!(
        t.store
            .get(&t.bucket, "ver", ByteRange::from(0), Some(&v2))
            .await
            .unwrap()
            .meta
            .size,
        101
    );
}

/// Multipart uploads assemble parts in order with the combined CRC32C.
pub async fn multipart_round_trip(t: &Target) {
    let part = t.quirks.min_part_size.max(1000);
    let parts_data = [data(part, 1), data(part, 2), data(777, 3)];
    let up = t
        .store
        .multipart_start(&t.bucket, "mp/obj", &PutOptions::default())
        .await
        .unwrap();
    // Send out of order: order comes from part numbers.
    let mut infos = Vec::new();
    for i in [2usize, 0, 1] {
        let d = parts_data[i].clone();
        let crc = crc32c::crc32c(&d);
        infos.push(
            t.store
                .multipart_put(&up, i as u32 + 1, d, crc)
                .await
                .unwrap_or_else(|e| panic!("part {}: {e}", i + 1)),
        );
    }
    let whole: Vec<u8> = parts_data.concat();
    let want_crc = crc32c::crc32c(&whole);
    infos.sort_by_key(|p| p.part_number);
    let meta = t
        .store
        .multipart_complete(&up, &infos, Some(want_crc))
        .await
        .unwrap();
    assert_eq!(meta.size, whole.len() as u64);
    assert_eq!(get_all(t, "mp/obj", ByteRange::from(0)).await, whole);
    if !t.quirks.no_stored_crc32c {
        assert_eq!(
            t.store.head(&t.bucket, "mp/obj").await.unwrap().crc32c,
            Some(want_crc)
        );
    }
    let (objs, _) = list_keys(t, ListRequest::default()).await;
    assert_eq!(objs, ["mp/obj"], "no temporaries left in the bucket");
}

/// An aborted multipart upload leaves nothing behind.
pub async fn multipart_abort(t: &Target) {
    let up = t
        .store
        .multipart_start(&t.bucket, "ab/obj", &PutOptions::default())
        .await
        .unwrap();
    let d = data(t.quirks.min_part_size.max(1000), 7);
    let crc = crc32c::crc32c(&d);
    t.store.multipart_put(&up, 1, d, crc).await.unwrap();
    t.store.multipart_abort(&up).await.unwrap();
    assert_eq!(
        t.store.head(&t.bucket, "ab/obj").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let (objs, _) = list_keys(t, ListRequest::default()).await;
    assert!(objs.is_empty(), "nothing left: {objs:?}");
}

/// Deleted objects are gone; deleting a missing one is `NotFound`, except
/// where the protocol makes DELETE idempotent (S3).
pub async fn delete(t: &Target) {
    put(t, "del", data(10, 8)).await;
    t.store.delete(&t.bucket, "del").await.unwrap();
    assert_eq!(
        t.store.head(&t.bucket, "del").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let again = t.store.delete(&t.bucket, "del").await;
    if t.quirks.idempotent_delete {
        assert!(
            again.is_ok() || again.as_ref().unwrap_err().kind() == ErrorKind::NotFound,
            "{again:?}"
        );
    } else {
        assert_eq!(again.unwrap_err().kind(), ErrorKind::NotFound);
    }
}
