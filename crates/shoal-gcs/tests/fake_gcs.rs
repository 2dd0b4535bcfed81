//! Against a live fake-gcs-server (or real GCS through an emulator URL):
//! runs only when `SHOAL_TEST_GCS` is set, e.g. `http://127.0.0.1:4443`
//! (start one with `scripts/servers.sh start gcs`). Every run makes its
//! own bucket, because the server is shared.

use bytes::Bytes;
use futures::TryStreamExt;
use shoal_core::{
    BucketStore, ByteRange, ErrorKind, ListRequest, MultipartStore, ObjectVersion, Projection,
    PutOptions, Store,
};
use shoal_gcs::{GcsConfig, GcsStore};

/// Keys that break stores that normalise or mis-encode names.
const KEYS: &[&str] = &[
    "a//b",
    "dir/",
    "dir/x",
    "dir/y/z",
    "sp ace/ü/100%/x+y?#",
    "z&=;,@:$!'()*",
];

fn store() -> Option<GcsStore> {
    let Ok(endpoint) = std::env::var("SHOAL_TEST_GCS") else {
        eprintln!(
            "skipping: set SHOAL_TEST_GCS=http://127.0.0.1:4443 to run against fake-gcs-server"
        );
        return None;
    };
    let cfg = GcsConfig {
        endpoint: Some(endpoint),
        anonymous: true,
        ..Default::default()
    };
    Some(GcsStore::new(cfg).expect("store"))
}

fn body_of(key: &str) -> Bytes {
    Bytes::from(format!("contents of {key}: {}", "x".repeat(key.len() * 3)))
}

async fn read_all(
    s: &GcsStore,
    b: &str,
    k: &str,
    r: ByteRange,
) -> (shoal_core::GetResponse, Vec<u8>) {
    let mut resp = s.get(b, k, r, None).await.expect("get");
    let mut out = Vec::new();
    while let Some(c) = resp.body.try_next().await.expect("body") {
        out.extend_from_slice(&c);
    }
    (resp, out)
}

async fn list_all(
    s: &GcsStore,
    b: &str,
    mut req: ListRequest,
) -> (Vec<String>, Vec<String>, usize) {
    let (mut keys, mut prefixes, mut pages) = (Vec::new(), Vec::new(), 0);
    loop {
        let p = s.list_page(b, &req).await.expect("list");
        pages += 1;
        keys.extend(p.objects.into_iter().map(|o| o.key));
        prefixes.extend(p.prefixes);
        match p.next_page_token {
            Some(t) => req.page_token = Some(t),
            None => return (keys, prefixes, pages),
        }
    }
}

async fn temporaries(s: &GcsStore, b: &str) -> Vec<String> {
    let req = ListRequest {
        prefix: ".shoal-tmp/".into(),
        ..Default::default()
    };
    list_all(s, b, req).await.0
}

#[tokio::test]
async fn fake_gcs_end_to_end() {
    let Some(s) = store() else { return };
    let b = format!("gcsdev-{:016x}", rand::random::<u64>());
    s.create_bucket(&b).await.expect("create bucket");
    let e = s.create_bucket(&b).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");

    // put / head / get, keys verbatim.
    for k in KEYS {
        let data = body_of(k);
        let m = s
            .put(&b, k, data.clone(), &PutOptions::default())
            .await
            .expect("put");
        assert_eq!(m.key, *k);
        assert_eq!(m.size, data.len() as u64);
        assert_eq!(m.checksums.crc32c(), Some(crc32c::crc32c(&data)));
        let h = s.head(&b, k).await.expect("head");
        assert_eq!(
            (h.key.as_str(), h.size, h.checksums.crc32c()),
            (*k, m.size, m.checksums.crc32c())
        );
        assert!(h.updated_ns.is_some());
        let (resp, got) = read_all(&s, &b, k, ByteRange::from(0)).await;
        assert_eq!(got, data);
        assert_eq!(resp.meta.size, data.len() as u64);
        assert_eq!(resp.meta.checksums.crc32c(), m.checksums.crc32c());
        assert_eq!(resp.meta.version, m.version);
        assert_eq!(resp.range, ByteRange::new(0, data.len() as u64));
    }

    // Ranges: the response says what it returned and the whole size.
    let k = "sp ace/ü/100%/x+y?#";
    let data = body_of(k);
    let (resp, got) = read_all(&s, &b, k, ByteRange::new(3, 10)).await;
    assert_eq!(got, &data[3..10]);
    assert_eq!(resp.range, ByteRange::new(3, 10));
    assert_eq!(resp.meta.size, data.len() as u64);
    let (resp, got) = read_all(&s, &b, k, ByteRange::from(5)).await;
    assert_eq!(got, &data[5..]);
    assert_eq!(resp.range, ByteRange::new(5, data.len() as u64));
    let (resp, got) = read_all(&s, &b, k, ByteRange::new(4, 4)).await;
    assert!(got.is_empty());
    assert_eq!(resp.meta.size, data.len() as u64);

    // Versions: the current generation reads, another one is "changed".
    let gen_ = s.head(&b, k).await.unwrap().version.unwrap();
    let r = s
        .get(&b, k, ByteRange::new(0, 2), Some(&gen_))
        .await
        .expect("pinned get");
    assert_eq!(r.meta.version.as_ref(), Some(&gen_));
    let e = s
        .get(
            &b,
            k,
            ByteRange::new(0, 2),
            Some(&ObjectVersion::Generation(1)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
    assert!(e.to_string().contains(&format!("gs://{b}/{k}")), "{e}");

    // Preconditions and checksums.
    let opts = PutOptions {
        if_not_exists: true,
        ..Default::default()
    };
    let e = s
        .put(&b, "a//b", Bytes::from_static(b"new"), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
    let bad = PutOptions {
        crc32c: Some(crc32c::crc32c(b"something else")),
        ..Default::default()
    };
    let e = s
        .put(&b, "bad", Bytes::from_static(b"data"), &bad)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert_eq!(
        s.head(&b, "bad").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // gzip-stored objects arrive as stored.
    let gz = Bytes::from_static(
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    );
    let opts = PutOptions {
        content_encoding: Some("gzip".into()),
        content_type: Some("text/plain".into()),
        ..Default::default()
    };
    s.put(&b, "gz", gz.clone(), &opts).await.expect("put gzip");
    let (resp, got) = read_all(&s, &b, "gz", ByteRange::from(0)).await;
    assert_eq!(got, gz);
    assert_eq!(resp.meta.content_encoding.as_deref(), Some("gzip"));
    s.delete(&b, "gz").await.unwrap();

    // Listing: prefix + delimiter.
    let req = ListRequest {
        prefix: "dir/".into(),
        delimiter: Some("/".into()),
        ..Default::default()
    };
    let (keys, prefixes, _) = list_all(&s, &b, req).await;
    assert_eq!(keys, ["dir/", "dir/x"]);
    assert_eq!(prefixes, ["dir/y/"]);

    // Paging two at a time, with each projection (the server may ignore it).
    let mut sorted: Vec<String> = KEYS.iter().map(|k| k.to_string()).collect();
    sorted.sort();
    for projection in [
        Projection::NameOnly,
        Projection::NameSizeTime,
        Projection::Full,
    ] {
        let req = ListRequest {
            max_results: Some(2),
            projection,
            ..Default::default()
        };
        let (keys, _, pages) = list_all(&s, &b, req).await;
        assert_eq!(keys, sorted);
        assert_eq!(pages, KEYS.len().div_ceil(2));
    }

    // Offsets: start inclusive, end exclusive.
    let req = ListRequest {
        start_offset: Some("dir/".into()),
        end_offset: Some("dir/y/z".into()),
        ..Default::default()
    };
    assert_eq!(list_all(&s, &b, req).await.0, ["dir/", "dir/x"]);

    // A composite upload over the 32-source limit: 40 parts of uneven sizes.
    let opts = PutOptions {
        content_type: Some("application/x-test".into()),
        ..Default::default()
    };
    let dest = "composed//obj ü";
    let up = s.multipart_start(&b, dest, &opts).await.expect("start");
    let mut whole = Vec::new();
    let mut parts = Vec::new();
    for n in (1..=40u32).rev() {
        let part: Vec<u8> = (0..(1000 + n * 37)).map(|i| (i * n % 251) as u8).collect();
        let crc = crc32c::crc32c(&part);
        parts.push(
            s.multipart_put(&up, n, Bytes::from(part), crc)
                .await
                .expect("part"),
        );
    }
    parts.sort_by_key(|p| p.part_number);
    for n in 1..=40u32 {
        whole.extend((0..(1000 + n * 37)).map(|i| (i * n % 251) as u8));
    }
    let m = s
        .multipart_complete(&up, &parts, Some(crc32c::crc32c(&whole)))
        .await
        .expect("complete");
    assert_eq!(m.key, dest);
    assert_eq!(m.size, whole.len() as u64);
    assert_eq!(m.checksums.crc32c(), Some(crc32c::crc32c(&whole)));
    let (_, got) = read_all(&s, &b, dest, ByteRange::from(0)).await;
    assert!(got == whole, "composed bytes differ");
    assert!(
        temporaries(&s, &b).await.is_empty(),
        "temporaries left behind"
    );

    // A wrong expected checksum: nothing stored, nothing left behind.
    let up = s
        .multipart_start(&b, "wrong", &PutOptions::default())
        .await
        .unwrap();
    let mut parts = Vec::new();
    for n in 1..=3u32 {
        let part = Bytes::from(vec![n as u8; 100]);
        parts.push(
            s.multipart_put(&up, n, part.clone(), crc32c::crc32c(&part))
                .await
                .unwrap(),
        );
    }
    let e = s
        .multipart_complete(&up, &parts, Some(0x1234))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert_eq!(
        s.head(&b, "wrong").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(
        temporaries(&s, &b).await.is_empty(),
        "temporaries left behind"
    );

    // Abort deletes every part.
    let up = s
        .multipart_start(&b, "aborted", &PutOptions::default())
        .await
        .unwrap();
    for n in 1..=3u32 {
        let part = Bytes::from(vec![n as u8; 10]);
        s.multipart_put(&up, n, part.clone(), crc32c::crc32c(&part))
            .await
            .unwrap();
    }
    assert_eq!(temporaries(&s, &b).await.len(), 3);
    s.multipart_abort(&up).await.expect("abort");
    assert!(
        temporaries(&s, &b).await.is_empty(),
        "abort left parts behind"
    );
    assert_eq!(
        s.head(&b, "aborted").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // Delete.
    for k in KEYS.iter().chain([&dest]) {
        s.delete(&b, k).await.expect("delete");
        let e = s.head(&b, k).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert_eq!(e.url(), format!("gs://{b}/{k}"));
    }
    let e = s.delete(&b, "a//b").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(list_all(&s, &b, ListRequest::default()).await.0.is_empty());
}

#[tokio::test]
async fn fake_gcs_resumable_upload() {
    let Some(s) = store() else { return };
    let b = format!("gcsdev-{:016x}", rand::random::<u64>());
    s.create_bucket(&b).await.expect("create bucket");

    // 2.5 chunks in odd-sized pieces: two full chunks, then the final one.
    let total = shoal_gcs::RESUMABLE_CHUNK_SIZE * 5 / 2 + 12_345;
    let data: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
    let crc = crc32c::crc32c(&data);
    let pieces = |d: Vec<u8>| {
        let pieces: Vec<shoal_core::Result<Bytes>> = d
            .chunks(100_003)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::stream::iter(pieces)
    };
    let opts = PutOptions {
        crc32c: Some(crc),
        content_type: Some("text/plain".into()),
        ..Default::default()
    };
    let key = "resumable//ü 100%";
    let m = s
        .resumable_upload(&b, key, pieces(data.clone()), &opts)
        .await
        .expect("resumable upload");
    assert_eq!(
        (m.key.as_str(), m.size, m.checksums.crc32c()),
        (key, total as u64, Some(crc))
    );
    let (_, got) = read_all(&s, &b, key, ByteRange::from(0)).await;
    assert!(got == data, "resumable bytes differ");

    // A short stream is one ordinary request.
    let m = s
        .resumable_upload(
            &b,
            "short",
            pieces(b"tiny".to_vec()),
            &PutOptions::default(),
        )
        .await
        .expect("short upload");
    assert_eq!(m.size, 4);

    // A wrong expected checksum stores nothing, even after chunks were sent.
    let bad = PutOptions {
        crc32c: Some(crc ^ 1),
        ..Default::default()
    };
    let e = s
        .resumable_upload(&b, "bad", pieces(data), &bad)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Integrity, "{e}");
    assert_eq!(
        s.head(&b, "bad").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
}
