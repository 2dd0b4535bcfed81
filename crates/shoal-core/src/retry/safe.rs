//! Retrying writes and deletes whose outcome is unknown, without ever
//! replacing what another writer put there, and without turning work the
//! server did into a failure.
//!
//! A write that failed with a reset, a timeout or a 5xx after it was sent
//! ([`Error::may_have_been_applied`]) may have happened. Sending it again
//! blindly can replace an object another writer stored in between, and
//! sending it again with the caller's precondition turns our own success
//! into a 412 ("the object exists": it is ours). Google's clients retry such
//! calls only when they carry a precondition; shoal goes further and looks
//! first, with one metadata read (the *probe*), at what the object is now:
//!
//! - **our bytes** (size and checksum equal what we sent, and not the
//!   version we planned against): the write happened; done.
//! - **what we planned against** (still absent, or still that version):
//!   the write did not happen; it is sent again with that state as its
//!   precondition (`ifGenerationMatch`, 0 for absent; S3 `If-None-Match` /
//!   `If-Match`), so nothing written meanwhile can be replaced.
//! - **anything else**: another writer was there. A conflict naming both
//!   versions, nothing overwritten.
//!
//! A write planned against nothing in particular (no `--if-generation-match`,
//! no `--no-clobber`) is a "last writer wins" write: the probe's state
//! becomes its precondition, which keeps the retry from replacing a write
//! that lands between the probe and the retry. A delete that finds the
//! object gone after an unknown outcome is done (the 404 of our own
//! delete); one whose first answer is 404 is still "not found".
//!
//! A request that never reached the server ([`Error::unsent`]) or was
//! refused before any work (429) is sent again as it was. Backends call
//! these functions around their single HTTP attempt; the probe is the
//! backend's own retried HEAD. The schedule is the backend's
//! [`RetryPolicy`]. Nothing here knows HTTP: S3 reuses it by mapping
//! [`Planned`] onto the `PutOptions` fields it already sends.

use std::future::Future;

use crate::checksum::Checksums;
use crate::error::{Error, ErrorKind, Result};
use crate::meta::{ObjectMeta, ObjectVersion};
use crate::retry::RetryPolicy;
use crate::store::{Deleted, PutOptions};

/// What a write or delete was planned against: the state of the object
/// it may replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// No object (a create: `ifGenerationMatch=0`, `If-None-Match: *`).
    Absent,
    /// The object at this version.
    Version(ObjectVersion),
    /// Whatever is there (an unconditional write or delete).
    Any,
}

impl Planned {
    /// What a write with `opts` was planned against.
    pub fn of_put(opts: &PutOptions) -> Planned {
        if opts.if_not_exists {
            Planned::Absent
        } else if let Some(v) = &opts.if_match {
            Planned::Version(v.clone())
        } else {
            Planned::Any
        }
    }

    /// `opts` carrying this state as its precondition.
    pub fn apply(&self, opts: &PutOptions) -> PutOptions {
        let (if_not_exists, if_match) = match self {
            Planned::Absent => (true, None),
            Planned::Version(v) => (false, Some(v.clone())),
            Planned::Any => (false, None),
        };
        PutOptions {
            if_not_exists,
            if_match,
            ..opts.clone()
        }
    }

    /// The state a probe found, as a precondition.
    fn found(now: Option<&ObjectMeta>) -> Planned {
        match now {
            None => Planned::Absent,
            Some(m) => m.version.clone().map_or(Planned::Any, Planned::Version),
        }
    }

    fn describe(&self) -> String {
        match self {
            Planned::Absent => "no object".into(),
            Planned::Version(v) => v.to_string(),
            Planned::Any => "any object".into(),
        }
    }
}

/// What our write leaves when it succeeds: its size and checksums.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ours {
    /// Bytes written.
    pub size: u64,
    /// Their checksums, those known (a CRC32C, an MD5).
    pub checksums: Checksums,
}

impl Ours {
    /// Whether `m` holds these bytes: same size, and a checksum both sides
    /// know that is equal (with none in common, it cannot be said).
    pub fn matches(&self, m: &ObjectMeta) -> bool {
        if m.size != self.size {
            return false;
        }
        m.checksums
            .common(&self.checksums)
            .is_some_and(|r| r.is_ok())
    }
}

/// What to do after a write's outcome was unknown.
#[derive(Debug)]
enum Next {
    Done(Box<ObjectMeta>),
    Retry(Planned),
    Conflict(String),
}

fn decide(planned: &Planned, ours: &Ours, now: Option<ObjectMeta>) -> Next {
    if let Some(m) = &now {
        let is_planned = matches!(planned, Planned::Version(v) if m.version.as_ref() == Some(v));
        if !is_planned && ours.matches(m) {
            return Next::Done(Box::new(now.expect("checked")));
        }
    }
    match (planned, &now) {
        (Planned::Any, _) => Next::Retry(Planned::found(now.as_ref())),
        (Planned::Absent, None) => Next::Retry(Planned::Absent),
        (Planned::Version(v), Some(m)) if m.version.as_ref() == Some(v) => {
            Next::Retry(planned.clone())
        }
        (_, now) => Next::Conflict(format!(
            "it was planned against {} but now holds {}, which this write did not store",
            planned.describe(),
            Planned::found(now.as_ref()).describe()
        )),
    }
}

/// A conflict: nothing was overwritten.
fn conflict(e: &Error, why: String) -> Error {
    Error::new(
        ErrorKind::Precondition,
        e.op(),
        e.url(),
        format!(
            "{why}; nothing was overwritten (the first attempt failed: {})",
            e.message()
        ),
    )
    .with_hint(
        "another writer changed the object meanwhile; look at it, then run the command again",
    )
}

async fn wait(policy: &RetryPolicy, retry: u32, e: &Error) {
    tokio::time::sleep(policy.wait_before(retry, e)).await;
}

/// Writes with `attempt` (one request, sent with the precondition it is
/// given), retrying per `policy` as the module says. `probe` reads the
/// object's metadata (None: absent); `done` turns the object found holding
/// our bytes into the caller's answer.
pub async fn write<T, A, AF, P, PF>(
    policy: &RetryPolicy,
    planned: Planned,
    ours: Ours,
    mut attempt: A,
    probe: P,
    done: impl Fn(ObjectMeta) -> T,
) -> Result<T>
where
    A: FnMut(Planned) -> AF,
    AF: Future<Output = Result<T>>,
    P: Fn() -> PF,
    PF: Future<Output = Result<Option<ObjectMeta>>>,
{
    let mut pre = planned.clone();
    let mut unknown: Option<Error> = None;
    let mut n = 0u32;
    loop {
        n += 1;
        let e = match attempt(pre.clone()).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if let Some(first) = &unknown
            && e.kind() == ErrorKind::Precondition
        {
            // What the precondition met may be our own earlier attempt.
            return match probe().await {
                Ok(Some(m)) if ours.matches(&m) => Ok(done(m)),
                Ok(now) => Err(conflict(
                    first,
                    format!(
                        "it was planned against {} but now holds {}, which this write did not store",
                        pre.describe(),
                        Planned::found(now.as_ref()).describe()
                    ),
                )),
                Err(_) => Err(e),
            };
        }
        if !e.is_retryable() || n >= policy.max_attempts {
            return Err(e);
        }
        if e.may_have_been_applied() {
            let now = match probe().await {
                Ok(now) => now,
                Err(_) => return Err(e),
            };
            match decide(&planned, &ours, now) {
                Next::Done(m) => return Ok(done(*m)),
                Next::Retry(p) => pre = p,
                Next::Conflict(why) => return Err(conflict(&e, why)),
            }
            tracing::debug!(error = %e, precondition = %pre.describe(), "write outcome unknown; retrying");
            unknown.get_or_insert(e.clone_shallow());
        }
        wait(policy, n, &e).await;
    }
}

/// Deletes with `attempt` (one request, sent with the precondition it is
/// given: `Version` or `Any`), retrying per `policy`.
///
/// A delete whose outcome is unknown (a reset, a timeout, a 5xx after it
/// was sent) never deletes another version than the one it was planned
/// against. The probe decides:
///
/// - **gone**: done (our delete, whose answer was lost).
/// - **still the planned version**: sent again with that version as its
///   precondition.
/// - **another version**, planned against a version: the planned one is
///   gone (ours, or someone's), and the key holds a newer object another
///   writer stored meanwhile: [`Deleted::Replaced`], that object kept.
/// - **an object**, planned against `Any`: what it is cannot be told (the
///   original that the delete never reached, or one written after it), so
///   it is not deleted again: a conflict naming what the key holds. Callers
///   that mean a version pin it ([`Planned::Version`]); a name only this
///   run writes (a temporary) is deleted with [`delete_own`].
pub async fn delete<A, AF, P, PF>(
    policy: &RetryPolicy,
    planned: Planned,
    attempt: A,
    probe: P,
) -> Result<Deleted>
where
    A: FnMut(Planned) -> AF,
    AF: Future<Output = Result<()>>,
    P: Fn() -> PF,
    PF: Future<Output = Result<Option<ObjectMeta>>>,
{
    delete_with(policy, planned, false, attempt, probe).await
}

/// [`delete`] of a name only this run writes (a composite upload's parts):
/// whatever the key holds after a lost answer is ours, so it is deleted
/// again at the version the probe found.
pub async fn delete_own<A, AF, P, PF>(policy: &RetryPolicy, attempt: A, probe: P) -> Result<()>
where
    A: FnMut(Planned) -> AF,
    AF: Future<Output = Result<()>>,
    P: Fn() -> PF,
    PF: Future<Output = Result<Option<ObjectMeta>>>,
{
    delete_with(policy, Planned::Any, true, attempt, probe)
        .await
        .map(|_| ())
}

async fn delete_with<A, AF, P, PF>(
    policy: &RetryPolicy,
    planned: Planned,
    own: bool,
    mut attempt: A,
    probe: P,
) -> Result<Deleted>
where
    A: FnMut(Planned) -> AF,
    AF: Future<Output = Result<()>>,
    P: Fn() -> PF,
    PF: Future<Output = Result<Option<ObjectMeta>>>,
{
    let mut pre = planned.clone();
    let mut unknown = false;
    let mut n = 0u32;
    loop {
        n += 1;
        let e = match attempt(pre.clone()).await {
            Ok(()) => return Ok(Deleted::Gone),
            Err(e) => e,
        };
        if unknown && e.kind() == ErrorKind::NotFound {
            // Our own earlier delete, whose answer was lost.
            return Ok(Deleted::Gone);
        }
        if unknown && e.kind() == ErrorKind::Precondition {
            // The planned version went between the probe and this attempt.
            return match probe().await {
                Ok(None) => Ok(Deleted::Gone),
                Ok(Some(m)) => Ok(Deleted::Replaced(m.version)),
                Err(_) => Err(e),
            };
        }
        if !e.is_retryable() || n >= policy.max_attempts {
            return Err(e);
        }
        if e.may_have_been_applied() {
            let now = match probe().await {
                Ok(now) => now,
                Err(_) => return Err(e),
            };
            let Some(m) = now else {
                return Ok(Deleted::Gone);
            };
            match &planned {
                Planned::Version(v) if m.version.as_ref() == Some(v) => {}
                Planned::Version(_) => return Ok(Deleted::Replaced(m.version)),
                // Ours whatever it is: again, at the version it is at.
                _ if own => pre = Planned::found(Some(&m)),
                _ => {
                    return Err(conflict_kept(
                        &e,
                        format!(
                            "the delete's answer was lost and the key now holds {}; it was not deleted again, since it may be an object another writer stored meanwhile",
                            Planned::found(Some(&m)).describe()
                        ),
                    ));
                }
            }
            unknown = true;
        }
        wait(policy, n, &e).await;
    }
}

/// A delete that was not sent again: the object there was kept.
fn conflict_kept(e: &Error, why: String) -> Error {
    Error::new(ErrorKind::Precondition, e.op(), e.url(), why)
        .with_hint("look at the object; delete it again if it should go")
}

/// Runs `attempt` (one request) per `policy`, telling it whether an earlier
/// attempt may have been carried out: for calls whose retry meets its own
/// earlier success as a refusal (creating a bucket: 409), which the caller
/// then takes as done.
pub async fn run_knowing<T, A, AF>(policy: &RetryPolicy, mut attempt: A) -> Result<T>
where
    A: FnMut(bool) -> AF,
    AF: Future<Output = Result<T>>,
{
    let mut unknown = false;
    let mut n = 0u32;
    loop {
        n += 1;
        let e = match attempt(unknown).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if !e.is_retryable() || n >= policy.max_attempts {
            return Err(e);
        }
        unknown |= e.may_have_been_applied();
        wait(policy, n, &e).await;
    }
}

impl Error {
    /// A copy without the source chain (which is not `Clone`).
    fn clone_shallow(&self) -> Error {
        let mut c = Error::new(self.kind(), self.op(), self.url(), self.message());
        if let Some(s) = self.status() {
            c = c.with_status(s);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Op;
    use std::sync::Mutex;

    /// A one-object server: attempts are scripted to fail before or after
    /// the write took effect.
    struct Server {
        now: Mutex<Option<ObjectMeta>>,
        script: Mutex<Vec<Fault>>,
        sent: Mutex<Vec<Planned>>,
        next_gen: Mutex<i64>,
    }
    #[derive(Clone, Copy)]
    enum Fault {
        None,
        /// The write is done, its answer lost (a reset).
        Lost,
        /// 503 before any work.
        Busy,
        /// Someone else writes `size` bytes before this attempt.
        Interloper(u64),
        /// The delete is done, then another writer stores the key again,
        /// and the answer is lost.
        LostThenRecreated,
    }

    fn meta(size: u64, crc: u32, g: i64) -> ObjectMeta {
        ObjectMeta {
            size,
            checksums: Checksums::default().with_crc32c(crc),
            version: Some(ObjectVersion::Generation(g)),
            ..Default::default()
        }
    }

    impl Server {
        fn new(now: Option<ObjectMeta>, script: Vec<Fault>) -> Server {
            Server {
                now: Mutex::new(now),
                script: Mutex::new(script),
                sent: Mutex::new(vec![]),
                next_gen: Mutex::new(100),
            }
        }
        fn next_generation(&self) -> i64 {
            let mut g = self.next_gen.lock().unwrap();
            *g += 1;
            *g
        }
        fn fault(&self) -> Fault {
            let mut s = self.script.lock().unwrap();
            if s.is_empty() {
                Fault::None
            } else {
                s.remove(0)
            }
        }
        fn holds(&self, p: &Planned) -> bool {
            let now = self.now.lock().unwrap();
            match p {
                Planned::Any => true,
                Planned::Absent => now.is_none(),
                Planned::Version(v) => now.as_ref().and_then(|m| m.version.as_ref()) == Some(v),
            }
        }
        async fn put(&self, pre: Planned, ours: Ours) -> Result<ObjectMeta> {
            self.sent.lock().unwrap().push(pre.clone());
            let f = self.fault();
            if let Fault::Interloper(size) = f {
                let g = self.next_generation();
                *self.now.lock().unwrap() = Some(meta(size, 7, g));
            }
            if let Fault::Busy = f {
                return Err(
                    Error::new(ErrorKind::ServerBusy, Op::Upload, "gs://b/k", "503")
                        .with_status(503),
                );
            }
            if !self.holds(&pre) {
                return Err(
                    Error::new(ErrorKind::Precondition, Op::Upload, "gs://b/k", "412")
                        .with_status(412),
                );
            }
            let m = meta(
                ours.size,
                ours.checksums.crc32c().unwrap(),
                self.next_generation(),
            );
            *self.now.lock().unwrap() = Some(m.clone());
            match f {
                Fault::Lost => Err(Error::new(
                    ErrorKind::Connect,
                    Op::Upload,
                    "gs://b/k",
                    "connection reset",
                )),
                _ => Ok(m),
            }
        }
        async fn delete(&self, pre: Planned) -> Result<()> {
            self.sent.lock().unwrap().push(pre.clone());
            let f = self.fault();
            if self.now.lock().unwrap().is_none() {
                return Err(
                    Error::new(ErrorKind::NotFound, Op::Delete, "gs://b/k", "404").with_status(404),
                );
            }
            if !self.holds(&pre) {
                return Err(
                    Error::new(ErrorKind::Precondition, Op::Delete, "gs://b/k", "412")
                        .with_status(412),
                );
            }
            *self.now.lock().unwrap() = None;
            if let Fault::LostThenRecreated = f {
                let g = self.next_generation();
                *self.now.lock().unwrap() = Some(meta(8, 1, g));
            }
            match f {
                Fault::Lost | Fault::LostThenRecreated => Err(Error::new(
                    ErrorKind::Timeout,
                    Op::Delete,
                    "gs://b/k",
                    "timed out",
                )),
                _ => Ok(()),
            }
        }
        async fn probe(&self) -> Result<Option<ObjectMeta>> {
            Ok(self.now.lock().unwrap().clone())
        }
    }

    fn our_write() -> Ours {
        Ours {
            size: 5,
            checksums: Checksums::default().with_crc32c(42),
        }
    }

    async fn put(s: &Server, planned: Planned) -> Result<ObjectMeta> {
        write(
            &RetryPolicy::default(),
            planned,
            our_write(),
            |p| s.put(p, our_write()),
            || s.probe(),
            |m| m,
        )
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_create_whose_answer_was_lost_is_done_not_a_412() {
        let s = Server::new(None, vec![Fault::Lost]);
        let m = put(&s, Planned::Absent).await.unwrap();
        assert_eq!(m.checksums.crc32c(), Some(42));
        assert_eq!(s.sent.lock().unwrap().len(), 1, "no second write");
    }

    #[tokio::test(start_paused = true)]
    async fn a_blind_write_is_retried_against_what_the_probe_saw() {
        let old = meta(3, 9, 5);
        let s = Server::new(Some(old), vec![Fault::Busy]);
        put(&s, Planned::Any).await.unwrap();
        let sent = s.sent.lock().unwrap().clone();
        assert_eq!(
            sent,
            vec![Planned::Any, Planned::Version(ObjectVersion::Generation(5))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn another_writer_between_attempts_is_a_conflict() {
        // Planned against absent; a 503, and meanwhile someone stores other bytes.
        let s = Server::new(None, vec![Fault::Busy, Fault::Interloper(9)]);
        // The interloper acts at the second attempt, after our probe said
        // "absent": the retry's precondition refuses it.
        let e = put(&s, Planned::Absent).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Precondition);
        assert!(e.message().contains("planned against no object"), "{e}");
        assert_eq!(
            s.now.lock().unwrap().as_ref().unwrap().size,
            9,
            "theirs kept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_planned_version_replaced_meanwhile_is_a_conflict_naming_both() {
        let s = Server::new(Some(meta(3, 9, 5)), vec![Fault::Interloper(8)]);
        // The first attempt meets the interloper's version and is refused
        // (412, no earlier unknown outcome): a plain precondition failure.
        let e = put(&s, Planned::Version(ObjectVersion::Generation(5)))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Precondition);
        // A lost first answer, then the object is someone else's.
        let s = Server::new(Some(meta(3, 9, 5)), vec![Fault::Busy]);
        *s.next_gen.lock().unwrap() = 200;
        let planned = Planned::Version(ObjectVersion::Generation(4));
        let e = put(&s, planned).await.unwrap_err();
        assert!(
            e.message().contains("generation 4") && e.message().contains("generation 5"),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_whose_answer_was_lost_is_done() {
        let s = Server::new(Some(meta(3, 9, 5)), vec![Fault::Lost]);
        delete(
            &RetryPolicy::default(),
            Planned::Any,
            |p| s.delete(p),
            || s.probe(),
        )
        .await
        .unwrap();
        // Gone at the first look: the probe said so, no second request.
        assert_eq!(s.sent.lock().unwrap().len(), 1);
        // A delete whose first answer is 404 is still "not found".
        let s = Server::new(None, vec![]);
        let e = delete(
            &RetryPolicy::default(),
            Planned::Any,
            |p| s.delete(p),
            || s.probe(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    async fn del(s: &Server, planned: Planned) -> Result<Deleted> {
        delete(
            &RetryPolicy::default(),
            planned,
            |p| s.delete(p),
            || s.probe(),
        )
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_after_a_503_is_sent_again_at_its_version() {
        let s = Server::new(Some(meta(3, 9, 5)), vec![]);
        let busy_once = Mutex::new(true);
        let planned = Planned::Version(ObjectVersion::Generation(5));
        let r = delete(
            &RetryPolicy::default(),
            planned.clone(),
            |p| {
                let busy = std::mem::replace(&mut *busy_once.lock().unwrap(), false);
                let s = &s;
                async move {
                    if busy {
                        return Err(Error::new(ErrorKind::ServerBusy, Op::Delete, "u", "503")
                            .with_status(503));
                    }
                    s.delete(p).await
                }
            },
            || s.probe(),
        )
        .await
        .unwrap();
        assert_eq!(r, Deleted::Gone);
        assert_eq!(s.sent.lock().unwrap().clone(), vec![planned]);
        assert!(s.now.lock().unwrap().is_none());
    }

    /// The delete lands, its answer is lost, another writer stores the key
    /// again: the newer object is reported and kept, never deleted.
    #[tokio::test(start_paused = true)]
    async fn a_lost_delete_answer_never_deletes_a_recreated_key() {
        let planned = Planned::Version(ObjectVersion::Generation(5));
        let s = Server::new(Some(meta(3, 9, 5)), vec![Fault::LostThenRecreated]);
        let r = del(&s, planned.clone()).await.unwrap();
        assert_eq!(r, Deleted::Replaced(Some(ObjectVersion::Generation(101))));
        assert_eq!(s.sent.lock().unwrap().len(), 1, "no second delete");
        assert_eq!(
            s.now.lock().unwrap().as_ref().unwrap().size,
            8,
            "theirs kept"
        );
        // Unpinned, what the key holds cannot be told apart from the
        // original: it is not deleted again either.
        let s = Server::new(Some(meta(3, 9, 5)), vec![Fault::LostThenRecreated]);
        let e = del(&s, Planned::Any).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Precondition);
        assert!(e.message().contains("not deleted again"), "{e}");
        assert_eq!(s.sent.lock().unwrap().len(), 1, "no second delete");
        assert!(s.now.lock().unwrap().is_some(), "theirs kept");
        // A lost answer whose delete never took effect: sent again at the
        // planned version.
        let s = Server::new(Some(meta(3, 9, 5)), vec![]);
        let first = Mutex::new(true);
        let r = delete(
            &RetryPolicy::default(),
            planned.clone(),
            |p| {
                let lost = std::mem::replace(&mut *first.lock().unwrap(), false);
                let s = &s;
                async move {
                    if lost {
                        return Err(Error::new(ErrorKind::Timeout, Op::Delete, "u", "timed out"));
                    }
                    s.delete(p).await
                }
            },
            || s.probe(),
        )
        .await
        .unwrap();
        assert_eq!(r, Deleted::Gone);
        assert_eq!(s.sent.lock().unwrap().clone(), vec![planned]);
    }

    /// A temporary only this run writes: whatever the key holds after a
    /// lost answer is ours, and is deleted at the version found.
    #[tokio::test(start_paused = true)]
    async fn an_own_temporary_is_deleted_whatever_a_lost_answer_leaves() {
        let s = Server::new(Some(meta(3, 9, 5)), vec![]);
        let first = Mutex::new(true);
        delete_own(
            &RetryPolicy::default(),
            |p| {
                let lost = std::mem::replace(&mut *first.lock().unwrap(), false);
                let s = &s;
                async move {
                    if lost {
                        return Err(Error::new(ErrorKind::Connect, Op::Delete, "u", "reset"));
                    }
                    s.delete(p).await
                }
            },
            || s.probe(),
        )
        .await
        .unwrap();
        assert_eq!(
            s.sent.lock().unwrap().clone(),
            vec![Planned::Version(ObjectVersion::Generation(5))]
        );
        assert!(s.now.lock().unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn unsent_and_refused_requests_are_resent_without_a_probe() {
        let probes = Mutex::new(0);
        let tries = Mutex::new(0);
        let r = write(
            &RetryPolicy::default(),
            Planned::Absent,
            our_write(),
            |p| {
                let n = {
                    let mut t = tries.lock().unwrap();
                    *t += 1;
                    *t
                };
                async move {
                    assert_eq!(p, Planned::Absent);
                    match n {
                        1 => {
                            Err(Error::new(ErrorKind::Connect, Op::Upload, "u", "refused").unsent())
                        }
                        2 => Err(Error::new(ErrorKind::ServerBusy, Op::Upload, "u", "429")
                            .with_status(429)),
                        _ => Ok(1),
                    }
                }
            },
            || {
                *probes.lock().unwrap() += 1;
                async { Ok(None) }
            },
            |_| 0,
        )
        .await;
        assert_eq!(r.unwrap(), 1);
        assert_eq!(*probes.lock().unwrap(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bucket_created_by_a_lost_attempt_is_known() {
        let r = run_knowing(&RetryPolicy::default(), |earlier| async move {
            if earlier {
                Ok(earlier)
            } else {
                Err(Error::new(
                    ErrorKind::Timeout,
                    Op::CreateBucket,
                    "gs://b",
                    "timed out",
                ))
            }
        })
        .await;
        assert!(r.unwrap());
    }
}
