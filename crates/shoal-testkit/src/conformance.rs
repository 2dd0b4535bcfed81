//! The conformance suite: what every backend must do the same way.
//!
//! Each case takes a [`Target`] (a store and a fresh bucket) and panics with
//! a message naming the case on failure. `tests/conformance.rs` runs every
//! case against memory, local, fake-gcs-server, Google's storage-testbench
//! (where it is available), MinIO and moto. Where a server
//! cannot do something, the gap is a [`crate::Quirks`] flag, not a silent
//! skip.

use bytes::Bytes;
use futures::TryStreamExt;
use shoal_core::paginate::pages;
use shoal_core::{
    ByteRange, CopyRequest, ErrorKind, Lack, ListRequest, ObjectMeta, ObjectVersion, PutOptions,
    need,
};

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
                head.checksums.crc32c(),
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
    let refused = matches!(err.kind(), ErrorKind::Integrity | ErrorKind::Rejected)
        || (t.quirks.checksum_mismatch_is_412 && err.kind() == ErrorKind::Precondition);
    assert!(
        refused,
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

/// A read pinned to an old version fails, or (a store that keeps old
/// generations: the storage-testbench) returns that version whole: never
/// a mix of two versions.
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
    let err = match t
        .store
        .get(&t.bucket, "ver", ByteRange::from(0), Some(&v1))
        .await
    {
        Ok(old) => {
            let body: Vec<Bytes> = old.body.try_collect().await.unwrap();
            assert_eq!(
                body.concat(),
                data(100, 1).as_ref(),
                "the old version whole"
            );
            None
        }
        Err(e) => Some(e),
    };
    if let Some(err) = err {
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Changed | ErrorKind::NotFound | ErrorKind::Precondition
            ),
            "{err}"
        );
    }
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

/// The multipart uploads of `t`'s store, which every store here has.
fn multipart(t: &Target) -> &dyn shoal_core::MultipartStore {
    t.store
        .multipart()
        .expect("every store here has multipart uploads")
}

/// Multipart uploads assemble parts in order with the combined CRC32C.
pub async fn multipart_round_trip(t: &Target) {
    let part = t.quirks.min_part_size.max(1000);
    let parts_data = [data(part, 1), data(part, 2), data(777, 3)];
    let mp = multipart(t);
    let up = mp
        .multipart_start(&t.bucket, "mp/obj", &PutOptions::default())
        .await
        .unwrap();
    // Send out of order: order comes from part numbers.
    let mut infos = Vec::new();
    for i in [2usize, 0, 1] {
        let d = parts_data[i].clone();
        let crc = crc32c::crc32c(&d);
        infos.push(
            mp.multipart_put(&up, i as u32 + 1, d, crc)
                .await
                .unwrap_or_else(|e| panic!("part {}: {e}", i + 1)),
        );
    }
    let whole: Vec<u8> = parts_data.concat();
    let want_crc = crc32c::crc32c(&whole);
    infos.sort_by_key(|p| p.part_number);
    let meta = mp
        .multipart_complete(&up, &infos, Some(want_crc))
        .await
        .unwrap();
    assert_eq!(meta.size, whole.len() as u64);
    assert_eq!(get_all(t, "mp/obj", ByteRange::from(0)).await, whole);
    if !t.quirks.no_stored_crc32c {
        assert_eq!(
            t.store
                .head(&t.bucket, "mp/obj")
                .await
                .unwrap()
                .checksums
                .crc32c(),
            Some(want_crc)
        );
    }
    let (objs, _) = list_keys(t, ListRequest::default()).await;
    assert_eq!(objs, ["mp/obj"], "no temporaries left in the bucket");
}

/// An aborted multipart upload leaves nothing behind.
pub async fn multipart_abort(t: &Target) {
    let mp = multipart(t);
    let up = mp
        .multipart_start(&t.bucket, "ab/obj", &PutOptions::default())
        .await
        .unwrap();
    let d = data(t.quirks.min_part_size.max(1000), 7);
    let crc = crc32c::crc32c(&d);
    mp.multipart_put(&up, 1, d, crc).await.unwrap();
    mp.multipart_abort(&up).await.unwrap();
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

/// Says once, on stderr, that `case` does not run on this backend and
/// why: a gap the target declared (a [`crate::Quirks`] flag, or a
/// capability the store states), never a silent pass.
fn skipped(case: &str, why: &str) {
    eprintln!("conformance {case}: skipped on this backend: {why}");
}

fn copy_request<'a>(
    t: &'a Target,
    src_key: &'a str,
    src: &'a ObjectMeta,
    dst_key: &'a str,
    opts: &'a PutOptions,
) -> CopyRequest<'a> {
    CopyRequest {
        src_bucket: &t.bucket,
        src_key,
        src,
        dst_bucket: &t.bucket,
        dst_key,
        opts,
        replace_metadata: false,
        part_size: 64 << 20,
        workers: 2,
        requests: None,
    }
}

/// A server-side copy: the destination holds the source's bytes, size and
/// content type, and the source is unchanged.
pub async fn server_side_copy(t: &Target) {
    let body = data(70_000, 21);
    let opts = PutOptions {
        content_type: Some("text/x-shoal".into()),
        ..Default::default()
    };
    t.store
        .put(&t.bucket, "cp/src", body.clone(), &opts)
        .await
        .unwrap();
    let src = t.store.head(&t.bucket, "cp/src").await.unwrap();
    let none = PutOptions::default();
    let out = t
        .store
        .copy(&copy_request(t, "cp/src", &src, "cp/dst", &none))
        .await
        .unwrap();
    assert_eq!(out.size, body.len() as u64, "copy's answer");
    assert_eq!(
        get_all(t, "cp/dst", ByteRange::from(0)).await,
        body.as_ref()
    );
    // What the source kept of it (local files keep no content type).
    let dst = t.store.head(&t.bucket, "cp/dst").await.unwrap();
    assert_eq!(dst.content_type, src.content_type, "kept");
    assert_eq!(
        get_all(t, "cp/src", ByteRange::from(0)).await,
        body.as_ref()
    );
}

/// A copy that must not replace (`if_not_exists`) refuses an existing
/// destination, which keeps its bytes, and copies to an absent one; a
/// copy pinned to a source version that is gone fails.
pub async fn copy_preconditions(t: &Target) {
    put(t, "cpp/src", data(3000, 22)).await;
    put(t, "cpp/there", data(10, 23)).await;
    let src = t.store.head(&t.bucket, "cpp/src").await.unwrap();
    let create = PutOptions {
        if_not_exists: true,
        ..Default::default()
    };
    match t
        .store
        .copy(&copy_request(t, "cpp/src", &src, "cpp/there", &create))
        .await
    {
        // The store says its server would not enforce it (fake-gcs-server's
        // rewrite): the engines then copy through the client.
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            skipped("copy_preconditions (if_not_exists)", &e.to_string());
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
            assert_eq!(
                get_all(t, "cpp/there", ByteRange::from(0)).await,
                data(10, 23).as_ref(),
                "an existing destination keeps its bytes"
            );
            t.store
                .copy(&copy_request(t, "cpp/src", &src, "cpp/new", &create))
                .await
                .unwrap();
            assert_eq!(
                get_all(t, "cpp/new", ByteRange::from(0)).await,
                data(3000, 22).as_ref()
            );
        }
        Ok(m) => panic!("a copy that must not replace replaced cpp/there: {m:?}"),
    }
    // The source replaced since it was read (a new size, so local files'
    // mtime+size version differs too): the pinned copy must not run.
    put(t, "cpp/src", data(3001, 24)).await;
    let none = PutOptions::default();
    let stale = t
        .store
        .copy(&copy_request(t, "cpp/src", &src, "cpp/stale", &none))
        .await;
    if t.quirks.ignores_copy_source_pin {
        return skipped(
            "copy_preconditions (source pin)",
            "the server copies a replaced source (declared)",
        );
    }
    let err = stale.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Changed | ErrorKind::Precondition | ErrorKind::NotFound
        ),
        "{err}"
    );
    assert_eq!(
        t.store
            .head(&t.bucket, "cpp/stale")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound,
        "nothing copied from a replaced source"
    );
}

/// A delete at a version: refused (`Precondition`, the object stays) at
/// a version the object no longer has, done at the one it has.
pub async fn conditional_delete(t: &Target) {
    put(t, "cd/x", data(10, 25)).await;
    let old = t.store.head(&t.bucket, "cd/x").await.unwrap().version;
    put(t, "cd/x", data(11, 26)).await;
    let now = t.store.head(&t.bucket, "cd/x").await.unwrap().version;
    let (Some(old), Some(now)) = (old, now) else {
        let e = t
            .store
            .delete_if(&t.bucket, "cd/x", &ObjectVersion::ETag("\"x\"".into()))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "no versions: {e}");
        return skipped("conditional_delete", "the store has no object versions");
    };
    match t.store.delete_if(&t.bucket, "cd/x", &old).await {
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return skipped("conditional_delete", &e.to_string());
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
            assert_eq!(
                t.store.head(&t.bucket, "cd/x").await.unwrap().size,
                11,
                "the object stays"
            );
        }
        Ok(_) => assert!(
            t.quirks.ignores_delete_preconditions,
            "a delete at a stale version deleted the object (declare \
             Quirks::ignores_delete_preconditions if the server does so)"
        ),
    }
    if t.quirks.ignores_delete_preconditions {
        put(t, "cd/x", data(11, 26)).await;
    }
    let now = t
        .store
        .head(&t.bucket, "cd/x")
        .await
        .unwrap()
        .version
        .unwrap_or(now);
    t.store.delete_if(&t.bucket, "cd/x", &now).await.unwrap();
    assert_eq!(
        t.store.head(&t.bucket, "cd/x").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// Many deletes in one call: one result per key, in order, a missing key
/// counted as deleted; every key is gone afterwards.
pub async fn delete_many(t: &Target) {
    let keys: Vec<String> = ["dm/a", "dm/b b", "dm/c%2F", "dm/missing", "dm/é"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    for k in keys.iter().filter(|k| !k.ends_with("missing")) {
        put(t, k, data(7, 27)).await;
    }
    let batch: Vec<shoal_core::DeleteKey> = keys
        .iter()
        .map(|k| shoal_core::DeleteKey::any(k.as_str()))
        .collect();
    let out = match t.store.delete_many(&t.bucket, &batch).await {
        Ok(out) => out,
        Err(e) => {
            // Refused as a whole: the store must then offer no more
            // batches, so callers send single deletes.
            assert_eq!(
                t.store.capabilities().delete_batch,
                1,
                "batch refused ({e}), still offered"
            );
            return skipped("delete_many", &format!("the server refused the batch: {e}"));
        }
    };
    assert_eq!(out.len(), keys.len(), "one result per key");
    for (k, r) in keys.iter().zip(&out) {
        assert!(
            r.is_ok(),
            "{k}: {:?}",
            r.as_ref().err().map(|e| e.to_string())
        );
    }
    let (left, _) = list_keys(
        t,
        ListRequest {
            prefix: "dm/".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(left.is_empty(), "left: {left:?}");
}

/// A body of unknown length in one session, where the store has one.
pub async fn streamed_put(t: &Target) {
    if !t.store.capabilities().put_stream {
        let body: shoal_core::store::BoxByteStream =
            Box::pin(futures::stream::iter([Ok(Bytes::from_static(b"x"))]));
        let e = t
            .store
            .put_stream(&t.bucket, "sp/x", body, &PutOptions::default())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        return skipped("streamed_put", "the store has no single-session upload");
    }
    let whole = data(300_000, 28);
    let chunks: Vec<shoal_core::Result<Bytes>> = whole
        .chunks(65_536)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let body: shoal_core::store::BoxByteStream = Box::pin(futures::stream::iter(chunks));
    let meta = t
        .store
        .put_stream(&t.bucket, "sp/x", body, &PutOptions::default())
        .await
        .unwrap();
    assert_eq!(meta.size, whole.len() as u64);
    assert_eq!(get_all(t, "sp/x", ByteRange::from(0)).await, whole.as_ref());
}

/// A GET of `url` by an HTTP client with no credentials of its own: the
/// status and the body.
async fn plain_get(url: &str) -> (u16, Vec<u8>) {
    let r = reqwest::get(url).await.expect("GET");
    let status = r.status().as_u16();
    (status, r.bytes().await.expect("body").to_vec())
}

/// A presigned GET URL, fetched by an HTTP client without credentials,
/// returns the object; the same URL with its signature altered is refused.
pub async fn presigned_get(t: &Target) {
    let body = data(5000, 29);
    put(t, "ps/a b+c", body.clone()).await;
    let p = shoal_core::Presign::new(
        shoal_core::PresignMethod::Get,
        std::time::Duration::from_secs(300),
    );
    let signed = match need(t.store.signer(), Lack::Presign, &t.bucket, "ps/a b+c") {
        Ok(s) => s.presign(&t.bucket, "ps/a b+c", &p).await,
        Err(e) => Err(e),
    };
    let url = match signed {
        Ok(u) => u,
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return skipped("presigned_get", &e.to_string());
        }
        Err(e) if t.quirks.no_presign_key => {
            return skipped("presigned_get", &format!("no signing key here: {e}"));
        }
        Err(e) => panic!("presign: {e}"),
    };
    let (status, got) = plain_get(&url).await;
    assert_eq!(status, 200, "{url}: {}", String::from_utf8_lossy(&got));
    assert_eq!(got, body.as_ref());
    if !t.quirks.unchecked_signatures {
        let sig = url.find("Signature=").expect("a signature in the URL") + "Signature=".len();
        let mut bad = url.clone().into_bytes();
        bad[sig] = if bad[sig] == b'0' { b'1' } else { b'0' };
        let (status, _) = plain_get(&String::from_utf8(bad).unwrap()).await;
        assert_eq!(status, 403, "an altered signature must be refused");
    }
}

/// Listing order and pagination at awkward keys: UTF-8 byte order (`a-b`
/// before `a/b` before `a0`, ASCII before `é`), every key once across
/// pages of 2, none between pages lost or repeated.
pub async fn list_order_awkward(t: &Target) {
    // No key is also a folder of others (`lo/a` beside `lo/a/b`): local
    // files cannot hold both, and MinIO drops one of them from listings.
    let keys = [
        "lo/a!", "lo/a b", "lo/a-b", "lo/a/b", "lo/a0", "lo/a~", "lo/z", "lo/é", "lo/ü/x", "lo/%41",
    ];
    for k in keys {
        put(t, k, data(1, 30)).await;
    }
    let mut want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    want.sort();
    let req = ListRequest {
        prefix: "lo/".into(),
        max_results: Some(2),
        ..Default::default()
    };
    let (got, _) = list_keys(t, req).await;
    assert_eq!(got, want, "every key once, in UTF-8 byte order");
}

/// Buckets: a new one is listed, a non-empty one is not deleted
/// (`Precondition`), an empty one is.
pub async fn buckets(t: &Target) {
    let name = crate::unique_bucket("conf-b");
    let b = t.store.buckets().expect("every store here has buckets");
    b.create_bucket(&name).await.unwrap();
    let listed = b.list_buckets().await.unwrap();
    assert!(listed.iter().any(|b| b.name == name), "{name} not listed");
    t.store
        .put(&name, "k", data(3, 31), &PutOptions::default())
        .await
        .unwrap();
    let e = b.delete_bucket(&name).await.unwrap_err();
    if t.quirks.non_empty_bucket_is_400 {
        assert_eq!(e.kind(), ErrorKind::Rejected, "{e}");
    } else {
        assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
    }
    t.store.delete(&name, "k").await.unwrap();
    b.delete_bucket(&name).await.unwrap();
    let listed = b.list_buckets().await.unwrap();
    assert!(
        !listed.iter().any(|b| b.name == name),
        "{name} still listed"
    );
}
