//! Bucket-level operations beside `create_bucket`: listing the buckets of
//! a project and deleting one.
//!
//! GCS lists buckets per project (`GET /storage/v1/b?project=P`), so a
//! listing needs one: the configured project (`GOOGLE_CLOUD_PROJECT`,
//! `CLOUDSDK_CORE_PROJECT`), else the `project_id` of a service-account
//! key file. Emulators accept any.

use serde::Deserialize;
use shoal_core::{BucketInfo, Error, ErrorKind, Op, Result};

use crate::client::{Client, Query, protocol, with_kind};

/// Pages followed at most (1,000 buckets each): a server that keeps
/// answering a token must not keep us forever.
const MAX_BUCKET_PAGES: usize = 10_000;

#[derive(Deserialize)]
struct Buckets {
    #[serde(default)]
    items: Vec<Bucket>,
    #[serde(rename = "nextPageToken")]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct Bucket {
    name: String,
    #[serde(rename = "timeCreated")]
    time_created: Option<String>,
}

impl Client {
    pub(crate) async fn list_buckets(&self, project: Option<&str>) -> Result<Vec<BucketInfo>> {
        let url = "gs://";
        let Some(project) = project else {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                Op::ListBuckets,
                url,
                "listing buckets needs a project, and none is configured",
            )
            .with_hint("set GOOGLE_CLOUD_PROJECT (or CLOUDSDK_CORE_PROJECT) to the project whose buckets to list"));
        };
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_BUCKET_PAGES {
            let q = Query::new()
                .add("project", project)
                .add("maxResults", "1000")
                .add_opt("pageToken", token.as_deref());
            let http_url = format!("{}/storage/v1/b{}", self.base, q.as_str());
            let body = self
                .call_bytes(Op::ListBuckets, url, |c| c.get(&http_url))
                .await?;
            let page: Buckets = serde_json::from_slice(&body)
                .map_err(|e| protocol(Op::ListBuckets, url, "a JSON bucket list", e))?;
            all.extend(page.items.into_iter().map(|b| BucketInfo {
                name: b.name,
                created: b.time_created,
            }));
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(all),
            }
        }
        Err(protocol(
            Op::ListBuckets,
            url,
            "a last page",
            format!("still a page token after {MAX_BUCKET_PAGES} pages"),
        ))
    }

    pub(crate) async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        let url = format!("gs://{bucket}");
        let http_url = self.bucket_url(bucket);
        let r = shoal_core::retry::safe::run_knowing(&self.retry, |earlier| {
            let req = self.http.delete(&http_url);
            let url = url.as_str();
            async move {
                match self.once_bytes(Op::DeleteBucket, url, req).await {
                    // 404 after an attempt whose answer was lost: the
                    // bucket that attempt removed.
                    Err(e) if earlier && e.status() == Some(404) => Ok(bytes::Bytes::new()),
                    r => r,
                }
            }
        })
        .await;
        match r {
            Ok(_) => Ok(()),
            // 409: "The bucket you tried to delete is not empty."
            Err(e) if e.status() == Some(409) => Err(with_kind(e, ErrorKind::Precondition)
                .with_hint("remove its objects first, or use rb --force")),
            Err(e) => Err(e),
        }
    }
}
