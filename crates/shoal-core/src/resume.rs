//! Download streams that survive a broken connection.
//!
//! When a body stream fails halfway (reset, timeout, early EOF), restarting
//! from byte zero wastes everything already received, and a whole-request
//! retry middleware cannot do better because it does not know what the
//! caller consumed. This stream knows: it counts the bytes it has handed
//! out and reopens the object with `Range: bytes=<next>-<end>`, pinned to
//! the same generation/ETag so a replaced object is an error, not a splice.
//! It never skips a byte and never repeats one.

use std::sync::Arc;

use futures::StreamExt;

use crate::error::{Error, ErrorKind, Op};
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
        loop {
            if st.done || st.end.is_some_and(|end| st.pos >= end) {
                return None;
            }
            if st.body.is_none() {
                let range = ByteRange { start: st.pos, end: st.end };
                // The backend retries the request itself (see crate::retry).
                let opened = st.store.get(&st.bucket, &st.key, range, st.version.as_ref()).await;
                match opened {
                    Ok(r) => st.body = Some(r.body),
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                }
            }
            let next = st.body.as_mut().expect("opened above").next().await;
            match next {
                Some(Ok(chunk)) => {
                    st.pos += chunk.len() as u64;
                    st.failures = 0;
                    if let Some(end) = st.end
                        && st.pos > end {
                            st.done = true;
                            let e = Error::new(
                                ErrorKind::Integrity,
                                Op::Download,
                                &st.url,
                                format!("server sent {} bytes past the requested end {end}", st.pos - end),
                            );
                            return Some((Err(e), st));
                        }
                    return Some((Ok(chunk), st));
                }
                Some(Err(e)) if e.is_retryable() && st.failures + 1 < st.policy.max_attempts => {
                    tracing::debug!(url = %st.url, pos = st.pos, error = %e, "download stream broke; resuming");
                    st.failures += 1;
                    st.body = None;
                    tokio::time::sleep(st.policy.delay(st.failures)).await;
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => match st.end {
                    Some(end) if st.pos < end => {
                        st.body = None;
                        st.failures += 1;
                        if st.failures >= st.policy.max_attempts {
                            st.done = true;
                            let e = Error::new(
                                ErrorKind::Integrity,
                                Op::Download,
                                &st.url,
                                format!("stream ended at byte {} of {end}, repeatedly", st.pos),
                            );
                            return Some((Err(e), st));
                        }
                        tracing::debug!(url = %st.url, pos = st.pos, end, "download stream ended early; resuming");
                        tokio::time::sleep(st.policy.delay(st.failures)).await;
                    }
                    _ => return None,
                },
            }
        }
    })
    .fuse()
    .boxed()
}
