//! Pagination, written once: a backend implements one list request and
//! every caller gets a stream of pages.

use std::sync::Arc;

use futures::Stream;

use crate::error::Result;
use crate::meta::{ListPage, ListRequest};
use crate::store::Store;

/// Every page of a listing, in order, until the store says there are no
/// more. Each request is retried by the backend (see [`crate::retry`]).
pub fn pages(
    store: Arc<dyn Store>,
    bucket: String,
    req: ListRequest,
) -> impl Stream<Item = Result<ListPage>> + Send {
    futures::stream::unfold(Some(req), move |state| {
        let store = store.clone();
        let bucket = bucket.clone();
        async move {
            let req = state?;
            match (store.list_page(&bucket, &req)).await {
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
