//! Download streams that survive a broken connection.
//!
//! When a body stream fails halfway (reset, timeout, early EOF), restarting
//! from byte zero wastes everything already received, and a whole-request
//! retry middleware cannot do better because it does not know what the
//! caller consumed. This stream knows: it counts the bytes it has handed
//! out and reopens the object with `Range: bytes=<next>-<end>`, pinned to
//! the same generation/ETag so a replaced object is an error, not a splice.
//! It never skips a byte and never repeats one.

use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;

use crate::error::{Error, ErrorKind, Op, Result};
use crate::meta::{ByteRange, ObjectVersion};
use crate::retry::RetryPolicy;
use crate::store::{BoxByteStream, Store};

struct State {
    store: Arc<dyn Store>,
    bucket: String,
    key: String,
    url: String,
    pos: u64,
    end: Option<u64>,
    version: Option<ObjectVersion>,
    body: Option<BoxByteStream>,
    policy: RetryPolicy,
    failures: u32,
    done: bool,
}

/// Reads `range` of an object, resuming after failures from the last byte
/// received. `policy.max_attempts` bounds consecutive failures that bring
/// no new byte (progress resets the count, so a long download survives many
/// separate hiccups). `first` is an already-open body for the same range (so the
/// caller could read its headers), or None to open one here.
#[allow(clippy::too_many_arguments)]
pub fn resuming_stream(
    store: Arc<dyn Store>,
    bucket: &str,
    key: &str,
    url: &str,
    range: ByteRange,
    version: Option<ObjectVersion>,
    first: Option<BoxByteStream>,
    policy: RetryPolicy,
) -> BoxByteStream {
    let st = State {
        store,
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        url: url.to_owned(),
        pos: range.start,
        end: range.end,
        version,
        body: first,
        policy,
        failures: 0,
        done: false,
    };
    futures::stream::unfold(st, |mut st| async move {
        let item = st.next().await?;
        Some((item, st))
    })
    .fuse()
    .boxed()
}

impl State {
    /// The next chunk; an error, after which the stream ends; or None at
    /// the end of the range.
    async fn next(&mut self) -> Option<Result<Bytes>> {
        loop {
            if self.done || self.end.is_some_and(|end| self.pos >= end) {
                return None;
            }
            if self.body.is_none()
                && let Err(e) = self.open().await
            {
                return self.fail(e);
            }
            let step = match self.body.as_mut().expect("opened above").next().await {
                Some(Ok(chunk)) => ControlFlow::Break(self.received(chunk)),
                Some(Err(e)) => self.broke(e).await,
                None => self.ended().await,
            };
            if let ControlFlow::Break(item) = step {
                return item;
            }
        }
    }

    /// Opens the object from the next byte to hand out, pinned to its
    /// version. The backend retries the request itself (see crate::retry).
    async fn open(&mut self) -> Result<()> {
        let range = ByteRange {
            start: self.pos,
            end: self.end,
        };
        let opened = self
            .store
            .get(&self.bucket, &self.key, range, self.version.as_ref())
            .await?;
        self.body = Some(opened.body);
        Ok(())
    }

    /// Ends the stream with `e`.
    fn fail(&mut self, e: Error) -> Option<Result<Bytes>> {
        self.done = true;
        Some(Err(e))
    }

    /// Counts a chunk as handed out (progress: the failures in a row start
    /// over); bytes past the requested end are an error, not data.
    fn received(&mut self, chunk: Bytes) -> Option<Result<Bytes>> {
        self.pos += chunk.len() as u64;
        self.failures = 0;
        if let Some(end) = self.end
            && self.pos > end
        {
            let e = Error::new(
                ErrorKind::Integrity,
                Op::Download,
                &self.url,
                format!(
                    "server sent {} bytes past the requested end {end}",
                    self.pos - end
                ),
            );
            return self.fail(e);
        }
        Some(Ok(chunk))
    }

    /// The body failed: reopened after a pause if the error is retryable
    /// and the policy allows another failure in a row, else the end.
    async fn broke(&mut self, e: Error) -> ControlFlow<Option<Result<Bytes>>> {
        if !(e.is_retryable() && self.failures + 1 < self.policy.max_attempts) {
            return ControlFlow::Break(self.fail(e));
        }
        tracing::debug!(url = %self.url, pos = self.pos, error = %e, "download stream broke; resuming");
        self.failures += 1;
        self.body = None;
        tokio::time::sleep(self.policy.wait_before(self.failures, &e)).await;
        ControlFlow::Continue(())
    }

    /// The body ended: the stream's end, unless bytes of the requested
    /// range are missing, which are asked for again after a pause, unless
    /// that keeps happening.
    async fn ended(&mut self) -> ControlFlow<Option<Result<Bytes>>> {
        let end = match self.end {
            Some(end) if self.pos < end => end,
            _ => return ControlFlow::Break(None),
        };
        self.body = None;
        self.failures += 1;
        if self.failures >= self.policy.max_attempts {
            let e = Error::new(
                ErrorKind::Integrity,
                Op::Download,
                &self.url,
                format!("stream ended at byte {} of {end}, repeatedly", self.pos),
            );
            return ControlFlow::Break(self.fail(e));
        }
        tracing::debug!(url = %self.url, pos = self.pos, end, "download stream ended early; resuming");
        tokio::time::sleep(self.policy.delay(self.failures)).await;
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;
    use crate::store::{BucketStore, PutOptions};

    async fn store_with(data: &[u8]) -> Arc<MemoryStore> {
        let s = MemoryStore::new();
        s.create_bucket("b").await.unwrap();
        s.put(
            "b",
            "k",
            Bytes::copy_from_slice(data),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        Arc::new(s)
    }

    fn body(chunks: &[&'static [u8]]) -> Option<BoxByteStream> {
        let chunks: Vec<Result<Bytes>> = chunks.iter().map(|c| Ok(Bytes::from(*c))).collect();
        Some(futures::stream::iter(chunks).boxed())
    }

    async fn read(
        store: Arc<MemoryStore>,
        range: ByteRange,
        first: Option<BoxByteStream>,
        max_attempts: u32,
    ) -> (Vec<u8>, Option<Error>) {
        let policy = RetryPolicy {
            max_attempts,
            ..RetryPolicy::default()
        };
        let mut s = resuming_stream(store, "b", "k", "mem://b/k", range, None, first, policy);
        let mut got = Vec::new();
        while let Some(item) = s.next().await {
            match item {
                Ok(chunk) => got.extend_from_slice(&chunk),
                Err(e) => {
                    assert!(s.next().await.is_none(), "nothing after an error");
                    return (got, Some(e));
                }
            }
        }
        (got, None)
    }

    #[tokio::test(start_paused = true)]
    async fn broken_bodies_resume_where_they_broke() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let store = store_with(&data).await;
        store.cut_streams_after(Some(30_000));
        let range = ByteRange {
            start: 1_000,
            end: Some(190_000),
        };
        let (got, err) = read(store.clone(), range, None, 3).await;
        assert!(err.is_none(), "{err:?}");
        assert!(got == data[1_000..190_000], "every byte once, in order");
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_body_is_asked_for_again_but_not_forever() {
        let store = store_with(b"0123456789").await;
        let range = ByteRange {
            start: 0,
            end: Some(10),
        };
        let (got, err) = read(store.clone(), range, body(&[b"0123"]), 2).await;
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, b"0123456789");
        let (got, err) = read(store, range, body(&[b"0123"]), 1).await;
        assert_eq!(got, b"0123");
        let e = err.expect("an error");
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(
            e.to_string().contains("stream ended at byte 4 of 10"),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_past_the_end_are_an_error() {
        let store = store_with(b"0123456789").await;
        let range = ByteRange {
            start: 0,
            end: Some(4),
        };
        let (got, err) = read(store, range, body(&[b"01", b"2345"]), 3).await;
        assert_eq!(got, b"01");
        let e = err.expect("an error");
        assert_eq!(e.kind(), ErrorKind::Integrity);
        assert!(
            e.to_string().contains("2 bytes past the requested end 4"),
            "{e}"
        );
    }
}
