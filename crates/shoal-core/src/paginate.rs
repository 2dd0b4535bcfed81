//! Pagination, written once: a backend implements one list request and
//! every caller gets a stream of pages, each page retried on its own.

use std::sync::Arc;

use futures::Stream;

use crate::error::Result;
use crate::meta::{ListPage, ListRequest};
use crate::retry::RetryPolicy;
use crate::store::Store;

/// Every page of a listing, in order, until the store says there are no more.
pub fn pages(
    store: Arc<dyn Store>,
    bucket: String,
    req: ListRequest,
    policy: RetryPolicy,
) -> impl Stream<Item = Result<ListPage>> + Send {
    futures::stream::unfold(Some(req), move |state| {
        let store = store.clone();
        let bucket = bucket.clone();
        async move {
            let req = state?;
            match policy.run("list", || store.list_page(&bucket, &req)).await {
                Ok(page) => {
                    let next = page.next_page_token.clone().map(|t| ListRequest {
                        page_token: Some(t),
                        ..req
                    });
                    Some((Ok(page), next))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    })
}
