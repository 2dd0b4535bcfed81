//! One multipart upload, whoever feeds it: a file's parts read by `pread`
//! ([`crate::upload`]) or a body's parts as they arrive ([`crate::stream`],
//! which cloud-to-cloud copies use too).
//!
//! Started with the caller's options, its parts sent `workers` at a time,
//! each with its CRC32C (the server refuses a damaged part), then
//! completed with the CRC32C combined from the parts, which must also be
//! what the store reports for the assembled object. Any failure, and any
//! way out before completion (Ctrl-C, a cancelled task: the
//! [`crate::cleanup::AbortUpload`] guard), aborts it, so no orphaned parts
//! keep costing money, unless the upload is written down to be resumed
//! ([`crate::upload_journal`]): then a way out that leaves it completable
//! (Ctrl-C, a lost connection) keeps it for the next run, and only one
//! that does not (a changed file, a checksum, a precondition) aborts it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use shoal_core::checksum::crc32c_combine_all;
use shoal_core::{
    Error, ErrorKind, Lack, Location, MultipartUpload, Op, PartInfo, PutOptions, Result, Store,
    need,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::cleanup::{AbortUpload, abort_quietly};
use crate::upload_journal::Journal;
use crate::verify::check_sent;
use crate::{Report, Run};

/// A multipart upload in progress: parts sent or in flight.
pub(crate) struct Multipart {
    store: Arc<dyn Store>,
    upload: MultipartUpload,
    /// Aborts on any way out; None while `journal` keeps the upload.
    guard: Option<AbortUpload>,
    /// The upload is written down to be resumed by a later run.
    journal: Option<Journal>,
    /// Parts a resumed upload found stored and checked: not sent again.
    kept: std::collections::HashSet<u32>,
    /// Their bytes.
    kept_bytes: u64,
    run: Run,
    url: String,
    workers: Arc<Semaphore>,
    tasks: JoinSet<Result<PartInfo>>,
    parts: Vec<PartInfo>,
    /// Set when the upload is to be aborted: parts not yet sent are not
    /// sent, parts in flight end (see [`Multipart::finish`]).
    stop: Arc<AtomicBool>,
    /// Completed or aborted: nothing is left of it to resume.
    ended: bool,
}

impl Drop for Multipart {
    fn drop(&mut self) {
        // Dropped unfinished (Ctrl-C, a failure that keeps it): left on the
        // store for the next run, which the front end says.
        if self.journal.is_some() && !self.ended {
            crate::cleanup::note_kept(&self.url);
        }
    }
}

impl Multipart {
    /// Starts an upload to `dst` storing what `put` asks for, assembled as
    /// the store's [`shoal_core::Capabilities::upload_method`] says.
    pub(crate) async fn start(
        store: &Arc<dyn Store>,
        dst: &Location,
        put: &PutOptions,
        run: &Run,
    ) -> Result<Multipart> {
        let url = dst.to_string();
        let start_opts = PutOptions {
            assemble: store.capabilities().upload_method.assemble(),
            ..put.clone()
        };
        run.budgets.rates.request().await;
        let parts = need(store.multipart(), Lack::Multipart, &dst.bucket, &dst.key);
        let upload = (parts.map_err(|e| e.with_url(&url))?)
            .multipart_start(&dst.bucket, &dst.key, &start_opts)
            .await
            .map_err(|e| e.with_url(&url))?;
        Ok(Multipart::new(store, upload, run, url, None, Vec::new()))
    }

    fn new(
        store: &Arc<dyn Store>,
        upload: MultipartUpload,
        run: &Run,
        url: String,
        journal: Option<Journal>,
        kept: Vec<PartInfo>,
    ) -> Multipart {
        Multipart {
            guard: journal.is_none().then(|| AbortUpload::new(store, &upload)),
            journal,
            kept: kept.iter().map(|p| p.part_number).collect(),
            kept_bytes: kept.iter().map(|p| p.size).sum(),
            store: store.clone(),
            upload,
            run: run.clone(),
            url,
            workers: Arc::new(Semaphore::new(run.opts.workers.max(1))),
            tasks: JoinSet::new(),
            parts: kept,
            stop: Arc::new(AtomicBool::new(false)),
            ended: false,
        }
    }

    /// An upload an earlier run started, picked up with the parts it
    /// holds that were checked against the source (`kept`), and written
    /// down in `journal` still.
    pub(crate) fn resumed(
        store: &Arc<dyn Store>,
        dst: &Location,
        upload: MultipartUpload,
        run: &Run,
        journal: Journal,
        kept: Vec<PartInfo>,
    ) -> Multipart {
        Multipart::new(store, upload, run, dst.to_string(), Some(journal), kept)
    }

    /// Writes the upload down in `journal`, so that a run that ends early
    /// keeps it for the next one; left as it is (aborted on any way out)
    /// when the journal cannot be written.
    pub(crate) fn keep_in(&mut self, journal: Journal) {
        if journal.write(&self.upload.upload_id) {
            if let Some(g) = self.guard.take() {
                g.disarm();
            }
            if let Some(m) = self.store.multipart() {
                m.multipart_keep(&self.upload);
            }
            self.journal = Some(journal);
        }
    }

    /// Whether part `number` is already stored (a resumed upload's).
    pub(crate) fn has(&self, number: u32) -> bool {
        self.kept.contains(&number)
    }

    /// Sends part `number` of `len` bytes once a worker is free: `data`
    /// gives its bytes (run in the part's task, after its request slot and
    /// byte rate were granted, so a waiting part holds no buffer), and
    /// `sent` is handed them back once the store has them. Fails at once
    /// if a part sent earlier failed.
    pub(crate) async fn send<D, S>(&mut self, number: u32, len: u64, data: D, sent: S) -> Result<()>
    where
        D: Future<Output = Result<Bytes>> + Send + 'static,
        S: FnOnce(Bytes) + Send + 'static,
    {
        let max = self.store.capabilities().max_parts;
        if number > max {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                Op::Upload,
                &self.url,
                format!("more than {max} parts of {len} bytes"),
            )
            .with_hint("raise --part-size"));
        }
        let permit = (self.workers.clone().acquire_owned())
            .await
            .expect("semaphore never closed");
        // Fail fast: gather what finished while we waited for a worker.
        while let Some(done) = self.tasks.try_join_next() {
            self.parts.push(joined(done, &self.url)?);
        }
        let (store, upload, run) = (self.store.clone(), self.upload.clone(), self.run.clone());
        let url = self.url.clone();
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            let _permit = permit;
            let _slot = run.budgets.permit().await;
            run.budgets.rates.bytes(len).await;
            let data = data.await?;
            if stop.load(Ordering::SeqCst) {
                return Err(Error::new(
                    ErrorKind::Cancelled,
                    Op::Upload,
                    &url,
                    "not sent: the upload is being aborted",
                ));
            }
            let crc = shoal_core::checksum::crc32c_append(0, &data);
            let put = async {
                need(
                    store.multipart(),
                    Lack::Multipart,
                    &upload.bucket,
                    &upload.key,
                )?
                .multipart_put(&upload, number, data.clone(), crc)
                .await
            };
            let info = (run.budgets.sending(len, put))
                .await
                .map_err(|e| e.with_url(&url))?;
            sent(data);
            Ok(info)
        });
        Ok(())
    }

    /// Ends the upload: with `fed` an error (the caller could not give
    /// every part), or a part failing, or `last_check` failing once every
    /// part is stored (a file that changed meanwhile), it is aborted and
    /// that error returned; otherwise completed and its CRC32C checked.
    pub(crate) async fn finish(
        mut self,
        fed: Result<()>,
        last_check: impl FnOnce() -> Result<()>,
    ) -> Result<Report> {
        let joined_all = match fed {
            Ok(()) => self.join_all().await.and_then(|()| last_check()),
            Err(e) => Err(e),
        };
        if let Err(e) = joined_all {
            // Parts already sent are let finish before the abort: a part
            // the server stores after the abort looked for it would be
            // left behind (GCS composite parts are objects). Parts not yet
            // sent see `stop` and are not sent.
            self.stop.store(true, Ordering::SeqCst);
            while self.tasks.join_next().await.is_some() {}
            if self.journal.is_some() && completable_after(&e) {
                // Kept for the next run, which goes on from these parts.
                return Err(e.with_hint(
                    "the parts sent are kept: run the same command again to resume the upload (--no-resume starts over; `shoal uploads --abort` discards it)",
                ));
            }
            self.abort().await;
            return Err(e);
        }
        let mut parts = std::mem::take(&mut self.parts);
        parts.sort_by_key(|p| p.part_number);
        let crc = crc32c_combine_all(parts.iter().map(|p| (p.crc32c, p.size)));
        self.run.budgets.rates.request().await;
        let (bucket, key) = (&self.upload.bucket, &self.upload.key);
        let completed = match need(self.store.multipart(), Lack::Multipart, bucket, key) {
            Ok(m) => m.multipart_complete(&self.upload, &parts, Some(crc)).await,
            Err(e) => Err(e),
        };
        let meta = match completed {
            Ok(m) => m,
            Err(e) if self.journal.is_some() && completable_after(&e) => {
                return Err(e.with_url(self.url.clone()));
            }
            Err(e) => {
                let url = self.url.clone();
                self.abort().await;
                return Err(e.with_url(url));
            }
        };
        if let Some(g) = self.guard.take() {
            g.disarm();
        }
        if let Some(j) = &self.journal {
            j.remove();
        }
        self.ended = true;
        Ok(Report {
            resumed: self.kept_bytes,
            bytes: parts.iter().map(|p| p.size).sum(),
            // Requests this run made: the parts kept were sent by another.
            pieces: parts.len() - self.kept.len(),
            verified: check_sent(&meta.checksums, crc, &self.url)?,
            crc32c: crc,
            source_version: None,
        })
    }

    async fn join_all(&mut self) -> Result<()> {
        while let Some(done) = self.tasks.join_next().await {
            self.parts.push(joined(done, &self.url)?);
        }
        Ok(())
    }

    /// Aborts now, in this task, rather than from the guard's spawn.
    async fn abort(mut self) {
        if let Some(g) = self.guard.take() {
            g.disarm();
        }
        abort_quietly(&self.store, &self.upload).await;
        if let Some(j) = &self.journal {
            j.remove();
        }
        self.ended = true;
    }
}

/// Whether an upload that failed with `e` may still be completed by a
/// later run from the parts it holds: not when the source changed, a
/// checksum did not match, the destination's precondition failed or the
/// input is wrong (those abort it).
fn completable_after(e: &Error) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::Changed
            | ErrorKind::Integrity
            | ErrorKind::Precondition
            | ErrorKind::InvalidInput
            | ErrorKind::Protocol
            | ErrorKind::NotFound
    )
}

/// Unwraps a finished task: its own error, or a panic/cancel as an error.
fn joined<T>(done: std::result::Result<Result<T>, tokio::task::JoinError>, url: &str) -> Result<T> {
    match done {
        Ok(r) => r,
        Err(e) => Err(Error::new(
            ErrorKind::Io,
            Op::Upload,
            url,
            format!("worker failed: {e}"),
        )),
    }
}
