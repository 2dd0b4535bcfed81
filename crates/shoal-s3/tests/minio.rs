//! Round trip against a real S3 server (MinIO in development and CI).
//!
//! Runs only when `SHOAL_TEST_S3` names an endpoint (e.g.
//! `http://127.0.0.1:9000`, started by `scripts/servers.sh start s3`);
//! credentials come from `SHOAL_TEST_S3_KEY` / `SHOAL_TEST_S3_SECRET`
//! (default: MinIO's `minioadmin`). Each run makes its own bucket because
//! the server is shared. MinIO refuses keys with empty or dot segments
//! (`a//b`, `x/./y`), so those are tested on other backends.
//!
//! The conformance suite shared by every backend lives in shoal-testkit;
//! this file checks what is S3-specific: encoding, offsets over
//! `start-after`, full-object CRC32C on multipart, error wording.

use bytes::Bytes;
use futures::StreamExt;
use shoal_core::checksum::{crc32c_combine_all, md5_digest};
use shoal_core::{
    BucketStore, ByteRange, ErrorKind, ListRequest, MultipartStore, ObjectVersion, PutOptions,
    Signer, Store,
};
use shoal_s3::{S3Config, S3Store};

fn config() -> Option<S3Config> {
    let Ok(endpoint) = std::env::var("SHOAL_TEST_S3") else {
        eprintln!("skipping: set SHOAL_TEST_S3=http://127.0.0.1:9000 to run the MinIO tests");
        return None;
    };
    Some(S3Config {
        endpoint: Some(endpoint),
        access_key: Some(
            std::env::var("SHOAL_TEST_S3_KEY").unwrap_or_else(|_| "minioadmin".into()),
        ),
        secret_key: Some(
            std::env::var("SHOAL_TEST_S3_SECRET").unwrap_or_else(|_| "minioadmin".into()),
        ),
        ..Default::default()
    })
}

fn unique_bucket(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "s3dev-{tag}-{}-{:x}",
        std::process::id(),
        nanos & 0xffff_ffff
    )
}

async fn read_all(
    store: &S3Store,
    bucket: &str,
    key: &str,
    range: ByteRange,
    v: Option<&ObjectVersion>,
) -> shoal_core::Result<(Vec<u8>, shoal_core::GetResponse)> {
    let mut resp = store.get(bucket, key, range, v).await?;
    let mut out = Vec::new();
    while let Some(chunk) = resp.body.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok((out, resp))
}

async fn list_all(
    store: &S3Store,
    bucket: &str,
    mut req: ListRequest,
) -> (Vec<String>, Vec<String>, usize) {
    let (mut keys, mut prefixes, mut pages) = (Vec::new(), Vec::new(), 0);
    loop {
        let page = store.list_page(bucket, &req).await.unwrap();
        pages += 1;
        keys.extend(page.objects.into_iter().map(|o| o.key));
        prefixes.extend(page.prefixes);
        match page.next_page_token {
            Some(t) => req.page_token = Some(t),
            None => return (keys, prefixes, pages),
        }
        assert!(pages < 100, "paging does not end");
    }
}

#[tokio::test]
async fn round_trip() {
    let Some(cfg) = config() else { return };
    let store = S3Store::new(cfg).unwrap();
    let b = unique_bucket("rt");
    store.create_bucket(&b).await.unwrap();

    // PUT with both checksums, HEAD sees them.
    let odd = "a b/ü/100%/x+y";
    let data = Bytes::from_static(b"0123456789abcdef");
    let crc = crc32c::crc32c(&data);
    let opts = PutOptions {
        crc32c: Some(crc),
        md5: Some(md5_digest(&data)),
        ..Default::default()
    };
    let put = store.put(&b, odd, data.clone(), &opts).await.unwrap();
    let head = store.head(&b, odd).await.unwrap();
    assert_eq!(head.key, odd);
    assert_eq!(head.size, 16);
    assert_eq!(head.checksums.crc32c(), Some(crc));
    assert_eq!(head.checksums.md5(), Some(md5_digest(&data)));
    assert!(head.updated_ns.is_some());
    assert_eq!(head.version, put.version);

    // Ranged GET: whole size from Content-Range, resolved range, bytes.
    let (bytes, resp) = read_all(&store, &b, odd, ByteRange::new(2, 7), head.version.as_ref())
        .await
        .unwrap();
    assert_eq!(bytes, b"23456");
    assert_eq!(resp.meta.size, 16);
    assert_eq!(resp.range, ByteRange::new(2, 7));
    let (bytes, resp) = read_all(&store, &b, odd, ByteRange::from(10), None)
        .await
        .unwrap();
    assert_eq!(
        (bytes.as_slice(), resp.range),
        (&b"abcdef"[..], ByteRange::new(10, 16))
    );
    let (bytes, resp) = read_all(&store, &b, odd, ByteRange::new(12, 100), None)
        .await
        .unwrap();
    assert_eq!(
        (bytes.as_slice(), resp.range),
        (&b"cdef"[..], ByteRange::new(12, 16))
    );
    let (bytes, resp) = read_all(&store, &b, odd, ByteRange::from(0), None)
        .await
        .unwrap();
    assert_eq!((bytes.len(), resp.meta.checksums.crc32c()), (16, Some(crc)));
    let (bytes, resp) = read_all(&store, &b, odd, ByteRange::new(4, 4), None)
        .await
        .unwrap();
    assert_eq!((bytes.len(), resp.meta.size), (0, 16));

    // A pinned read of a replaced object is Changed, not spliced.
    let stale = ObjectVersion::ETag("\"0123456789abcdef0123456789abcdef\"".into());
    let e = read_all(&store, &b, odd, ByteRange::new(0, 4), Some(&stale))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
    eprintln!("changed: {e}");

    // If-None-Match and a wrong checksum.
    let e = store
        .put(
            &b,
            odd,
            data.clone(),
            &PutOptions {
                if_not_exists: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
    eprintln!("exists: {e}");
    let e = store
        .put(
            &b,
            "bad-crc",
            data.clone(),
            &PutOptions {
                crc32c: Some(crc ^ 1),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Integrity | ErrorKind::Rejected),
        "{e}"
    );
    eprintln!("bad crc: {e}");

    // Missing object: NotFound with the server's words.
    let e = store.head(&b, "no/such key").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(
        e.to_string()
            .starts_with(&format!("stat s3://{b}/no/such key: HTTP 404 Not Found")),
        "{e}"
    );
    eprintln!("missing: {e}");
    let e = read_all(&store, &b, "no/such key", ByteRange::from(0), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("NoSuchKey"), "{e}");

    // Listing: prefix, delimiter, trailing slash, paging, offsets.
    let keys = [
        "dir/a",
        "dir/b",
        "dir/c",
        "dir/d",
        "dir/e",
        "dir/sub/z",
        "dir/trailing/",
    ];
    for k in keys {
        store
            .put(
                &b,
                k,
                Bytes::from(k.as_bytes().to_vec()),
                &PutOptions::default(),
            )
            .await
            .unwrap();
    }
    assert_eq!(store.head(&b, "dir/trailing/").await.unwrap().size, 13);
    let base = ListRequest {
        prefix: "dir/".into(),
        ..Default::default()
    };
    let (all, _, pages) = list_all(
        &store,
        &b,
        ListRequest {
            max_results: Some(2),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(all, keys);
    assert_eq!(pages, 4);
    let (direct, prefixes, _) = list_all(
        &store,
        &b,
        ListRequest {
            delimiter: Some("/".into()),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(direct, ["dir/a", "dir/b", "dir/c", "dir/d", "dir/e"]);
    assert_eq!(prefixes, ["dir/sub/", "dir/trailing/"]);
    let (from_c, _, _) = list_all(
        &store,
        &b,
        ListRequest {
            start_offset: Some("dir/c".into()),
            max_results: Some(2),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(from_c, &keys[2..]);
    let (c_to_e, _, _) = list_all(
        &store,
        &b,
        ListRequest {
            start_offset: Some("dir/c".into()),
            end_offset: Some("dir/e".into()),
            max_results: Some(1),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(c_to_e, ["dir/c", "dir/d"]);
    // An offset inside a common prefix: S3 rolls the keys after it
    // (dir/sub/z) into `dir/sub/`; MinIO leaves that prefix out. Accept both.
    let (_, prefixes, _) = list_all(
        &store,
        &b,
        ListRequest {
            delimiter: Some("/".into()),
            start_offset: Some("dir/sub/y".into()),
            ..base.clone()
        },
    )
    .await;
    assert!(
        prefixes == ["dir/sub/", "dir/trailing/"] || prefixes == ["dir/trailing/"],
        "{prefixes:?}"
    );
    let (odd_keys, _, _) = list_all(
        &store,
        &b,
        ListRequest {
            prefix: "a b/".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(odd_keys, [odd]);
    let page = store
        .list_page(
            &b,
            &ListRequest {
                prefix: "a b/".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.objects[0].size, 16);
    assert!(page.objects[0].updated_ns.is_some());

    // Control characters survive listing thanks to encoding-type=url.
    let ctl = "ctl/\u{1}\ttab +%2B";
    store
        .put(&b, ctl, Bytes::from_static(b"c"), &PutOptions::default())
        .await
        .unwrap();
    let (ctl_keys, _, _) = list_all(
        &store,
        &b,
        ListRequest {
            prefix: "ctl/".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(ctl_keys, [ctl]);
    assert_eq!(store.head(&b, ctl).await.unwrap().size, 1);
    // Dot segments would be rewritten by URL parsing: refused up front.
    let e = store
        .put(&b, "x/./y", Bytes::new(), &PutOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");

    // Multipart: 3 × 5 MiB + a small tail, full-object CRC32C at the end.
    let key = "big/multi part ü";
    let up = store
        .multipart_start(&b, key, &PutOptions::default())
        .await
        .unwrap();
    let mut parts = Vec::new();
    let mut whole = Vec::new();
    for (i, len) in [5 << 20, 5 << 20, 5 << 20, 1234usize]
        .into_iter()
        .enumerate()
    {
        let chunk: Vec<u8> = (0..len).map(|j| ((j * 31 + i * 7) % 251) as u8).collect();
        let crc = crc32c::crc32c(&chunk);
        whole.extend_from_slice(&chunk);
        parts.push((i as u32 + 1, Bytes::from(chunk), crc));
    }
    // Parts may arrive in any order.
    let mut infos = Vec::new();
    for (n, data, crc) in parts.iter().rev() {
        infos.push(
            store
                .multipart_put(&up, *n, data.clone(), *crc)
                .await
                .unwrap(),
        );
    }
    let combined = crc32c_combine_all(infos.iter().rev().map(|p| (p.crc32c, p.size)));
    assert_eq!(combined, crc32c::crc32c(&whole));
    let done = store
        .multipart_complete(&up, &infos, Some(combined))
        .await
        .unwrap();
    assert_eq!(done.size, whole.len() as u64);
    let head = store.head(&b, key).await.unwrap();
    assert_eq!(head.size, whole.len() as u64);
    assert_eq!(
        head.checksums.crc32c(),
        Some(combined),
        "MinIO should keep a FULL_OBJECT CRC32C"
    );
    assert_eq!(head.checksums.md5(), None, "a multipart ETag is not an MD5");
    let (bytes, _) = read_all(
        &store,
        &b,
        key,
        ByteRange::new(5 << 20, (5 << 20) + 10),
        head.version.as_ref(),
    )
    .await
    .unwrap();
    assert_eq!(bytes, &whole[5 << 20..(5 << 20) + 10]);

    // Abort frees the upload; aborting again is not an error.
    let up = store
        .multipart_start(&b, "big/aborted", &PutOptions::default())
        .await
        .unwrap();
    store
        .multipart_put(&up, 1, Bytes::from_static(b"x"), crc32c::crc32c(b"x"))
        .await
        .unwrap();
    store.multipart_abort(&up).await.unwrap();
    store.multipart_abort(&up).await.unwrap();
    let e = store
        .multipart_put(&up, 2, Bytes::from_static(b"y"), crc32c::crc32c(b"y"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");

    // Delete everything (the bucket stays: the Store trait has no bucket delete).
    for k in keys.iter().copied().chain([odd, key, ctl]) {
        store.delete(&b, k).await.unwrap();
    }
    let (left, _, _) = list_all(&store, &b, ListRequest::default()).await;
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_conditional_multipart_upload_never_replaces_an_object() {
    let Some(cfg) = config() else { return };
    let store = S3Store::new(cfg).unwrap();
    let b = unique_bucket("ifnone");
    store.create_bucket(&b).await.unwrap();
    let create = PutOptions {
        if_not_exists: true,
        ..Default::default()
    };
    let part = Bytes::from(vec![7u8; 1000]);
    let crc = crc32c::crc32c(&part);
    for existing in [true, false] {
        let key = if existing { "there" } else { "new" };
        if existing {
            store
                .put(&b, key, Bytes::from_static(b"old"), &PutOptions::default())
                .await
                .unwrap();
        }
        // The precondition is S3's on CompleteMultipartUpload: where the
        // object appears, so one created after the start is kept too.
        let up = store.multipart_start(&b, key, &create).await.unwrap();
        let info = store
            .multipart_put(&up, 1, part.clone(), crc)
            .await
            .unwrap();
        let done = store.multipart_complete(&up, &[info], Some(crc)).await;
        if existing {
            let e = done.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Precondition, "{e}");
            assert!(e.to_string().contains("already exists"), "{e}");
            store.multipart_abort(&up).await.unwrap();
            let (old, _) = read_all(&store, &b, key, ByteRange::new(0, 3), None)
                .await
                .unwrap();
            assert_eq!(old, b"old");
        } else {
            assert_eq!(done.unwrap().size, 1000);
        }
    }
}

#[tokio::test]
async fn wrong_credentials_say_so() {
    let Some(cfg) = config() else { return };
    let good = S3Store::new(cfg.clone()).unwrap();
    let b = unique_bucket("auth");
    good.create_bucket(&b).await.unwrap();

    let bad = S3Store::new(S3Config {
        secret_key: Some("not-the-secret".into()),
        ..cfg.clone()
    })
    .unwrap();
    let e = bad.head(&b, "k").await.unwrap_err();
    let s = e.to_string();
    eprintln!("wrong secret: {s}");
    assert!(!s.contains("not-the-secret"));
    assert!(s.contains("AWS_SECRET_ACCESS_KEY"), "{s}");

    let bad = S3Store::new(S3Config {
        access_key: Some("nobody".into()),
        ..cfg.clone()
    })
    .unwrap();
    let e = bad
        .list_page(&b, &ListRequest::default())
        .await
        .unwrap_err();
    eprintln!("unknown key: {e}");
    assert!(e.to_string().contains("InvalidAccessKeyId"), "{e}");

    let anon = S3Store::new(S3Config {
        anonymous: true,
        access_key: None,
        secret_key: None,
        ..cfg
    })
    .unwrap();
    let e = anon
        .list_page(&b, &ListRequest::default())
        .await
        .unwrap_err();
    eprintln!("anonymous: {e}");
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn no_credentials_is_a_clear_error() {
    let Some(cfg) = config() else { return };
    // Only meaningful (and only safe: no IMDS) in a bare environment.
    let bare = std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
        && std::env::var_os("AWS_PROFILE").is_none()
        && std::env::var("AWS_EC2_METADATA_DISABLED").is_ok_and(|v| v == "true");
    if !bare {
        eprintln!("skipping: needs no AWS_* credentials and AWS_EC2_METADATA_DISABLED=true");
        return;
    }
    let store = S3Store::new(S3Config {
        access_key: None,
        secret_key: None,
        ..cfg
    })
    .unwrap();
    let t = std::time::Instant::now();
    let e = store.head("some-bucket", "k").await.unwrap_err();
    eprintln!("no credentials ({:?}): {e}", t.elapsed());
    assert_eq!(e.kind(), ErrorKind::Unauthenticated);
    assert!(e.to_string().contains("no AWS credentials found"), "{e}");
    assert!(e.to_string().contains("--no-sign-request"), "{e}");
    // Cached: the second request does not walk the chain again.
    let e2 = store.head("some-bucket", "k").await.unwrap_err();
    assert_eq!(e2.kind(), ErrorKind::Unauthenticated);
}

/// A presigned URL works for its lifetime only: one signed two hours ago
/// for one hour is refused by the server, one signed now is served (both
/// fetched with no credentials). The clock is moved by signing in the
/// past, not by waiting.
#[tokio::test]
async fn presigned_url_expires() {
    let Some(cfg) = config() else { return };
    let store = S3Store::new(cfg).unwrap();
    let bucket = unique_bucket("presign");
    store.create_bucket(&bucket).await.unwrap();
    store
        .put(
            &bucket,
            "k",
            Bytes::from_static(b"v"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let hour = std::time::Duration::from_secs(3600);
    let now = std::time::SystemTime::now();
    let at = |method, time| shoal_core::Presign {
        time: Some(time),
        ..shoal_core::Presign::new(method, hour)
    };
    let fresh = store
        .presign(&bucket, "k", &at(shoal_core::PresignMethod::Get, now))
        .await
        .unwrap();
    let r = http.get(&fresh).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"v");
    let expired = store
        .presign(
            &bucket,
            "k",
            &at(shoal_core::PresignMethod::Get, now - 2 * hour),
        )
        .await
        .unwrap();
    let r = http.get(&expired).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("AccessDenied") || body.contains("expired"),
        "{body}"
    );
    // A PUT URL with a signed header: served only with that header as
    // signed.
    let mut put = at(shoal_core::PresignMethod::Put, now);
    put.headers = vec![("Content-Type".into(), "text/csv".into())];
    let url = store.presign(&bucket, "k", &put).await.unwrap();
    assert!(
        url.contains("X-Amz-SignedHeaders=content-type%3Bhost"),
        "{url}"
    );
    let r = http.put(&url).body("w").send().await.unwrap();
    // MinIO answers AccessDenied ("headers ... not signed") with 400.
    let status = r.status().as_u16();
    assert!(
        matches!(status, 400 | 403),
        "without the signed header: {status}"
    );
    let r = (http.put(&url).header("content-type", "text/csv").body("w"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(store.head(&bucket, "k").await.unwrap().size, 1);
    store.delete(&bucket, "k").await.unwrap();
    store.delete_bucket(&bucket).await.unwrap();
    assert!(
        !store
            .list_buckets()
            .await
            .unwrap()
            .iter()
            .any(|b| b.name == bucket)
    );
}
