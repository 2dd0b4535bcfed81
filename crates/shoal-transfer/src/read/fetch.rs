//! Fetching one slice: pinned to the object's version, resumed after a
//! broken connection, hashed as it arrives; local files read in pieces.

use super::*;

pub(super) struct Fetch {
    pub(super) origin: Origin,
    pub(super) shared: Arc<Shared>,
    pub(super) slice: usize,
    pub(super) range: (u64, u64),
    pub(super) policy: RetryPolicy,
    pub(super) budget: Arc<Semaphore>,
    pub(super) budget_total: u64,
    pub(super) fetched: Option<Arc<AtomicU64>>,
    pub(super) rates: crate::rate::Rates,
    pub(super) direct: bool,
}

impl Fetch {
    pub(super) async fn run(self, tx: UnboundedSender<Piece>, reservation: OwnedSemaphorePermit) {
        match self.pump(&tx, reservation).await {
            Ok(Some(got)) => self.shared.got.lock().unwrap()[self.slice] = Some(got),
            Ok(None) => {}
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
        if self.slice == 0 {
            // Failed or cancelled before learning: the others need not wait.
            self.shared.learnt.send_replace(true);
        }
        drop(tx);
        let last = self.shared.slices_left.fetch_sub(1, Ordering::AcqRel) == 1;
        if last && self.direct {
            let _ = self.shared.ready.send(self.shared.index);
        }
    }

    /// Sends the slice's bytes; returns what they give, or None when the
    /// reader went away.
    pub(super) async fn pump(
        &self,
        tx: &UnboundedSender<Piece>,
        reservation: OwnedSemaphorePermit,
    ) -> Result<Option<Received>> {
        let (start, end) = self.range;
        let mut stream = self.open().await?;
        if matches!(self.origin, Origin::Store { .. }) {
            stream = self.rates.pace(stream);
        }
        // The first slice's request was sent before this one's (requests
        // go in order) and waits on nothing of this slice's: no deadlock.
        if self.slice > 0 {
            let _ = (self.shared.learnt.subscribe().wait_for(|&done| done)).await;
        }
        let mut reservation = Some(reservation);
        let mut n = 0u64;
        let mut sums = self.shared.expected().running(start);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if self.shared.cancelled.load(Ordering::Relaxed) {
                return Ok(None);
            }
            sums.update(&chunk);
            n += chunk.len() as u64;
            if let Some(f) = &self.fetched {
                f.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            let hold = self.hold(&mut reservation, chunk.len()).await;
            if tx.send(Ok((chunk, hold))).is_err() {
                return Ok(None);
            }
        }
        if n != end - start {
            return Err(Error::new(
                ErrorKind::Integrity,
                Op::Read,
                &self.shared.url,
                format!(
                    "bytes {start}-{end}: received {n} bytes, expected {}",
                    end - start
                ),
            ));
        }
        Ok(Some(Received::of(sums, n)))
    }

    /// The budget share for `n` bytes: from the reservation made before the
    /// request, or (past it, for slices bigger than the budget) newly taken.
    pub(super) async fn hold(
        &self,
        reservation: &mut Option<OwnedSemaphorePermit>,
        n: usize,
    ) -> Option<OwnedSemaphorePermit> {
        if let Some(r) = reservation {
            if r.num_permits() > n {
                return r.split(n);
            }
            let mut have = reservation.take()?;
            let more = n - have.num_permits();
            if more > 0 {
                let more = (more as u64).min(self.budget_total) as u32;
                if let Ok(p) = self.budget.clone().acquire_many_owned(more).await {
                    have.merge(p);
                }
            }
            return Some(have);
        }
        let want = (n as u64).min(self.budget_total) as u32;
        self.budget.clone().acquire_many_owned(want).await.ok()
    }

    pub(super) async fn open(&self) -> Result<BoxByteStream> {
        let (start, end) = self.range;
        let url = &self.shared.url;
        match &self.origin {
            Origin::Store { store, loc } => {
                let version = self.shared.meta.version.clone();
                let range = ByteRange::new(start, end);
                // A whole object asked for as such (no Range header): S3
                // sends its stored checksum only then, and a listing has
                // none. For an object of several slices the body is cut
                // after the first (its connection is closed, as downloads
                // do), and the others wait for what it learns.
                let meta = &self.shared.meta;
                let learn = start == 0 && !*self.shared.learnt.borrow();
                let asked = if learn { ByteRange::from(0) } else { range };
                self.rates.request().await;
                let mut first = (store.get(&loc.bucket, &loc.key, asked, version.as_ref()))
                    .await
                    .map_err(|e| e.with_url(url).with_op(Op::Read))?;
                if learn && first.meta.size == meta.size {
                    let expected =
                        Expected::learn(store, loc, &first.meta, Op::Read, &self.rates).await?;
                    let _ = self.shared.expected.set(expected);
                }
                if learn {
                    if end < meta.size {
                        first.body = crate::download::take_bytes(first.body, end - start);
                    }
                    self.shared.learnt.send_replace(true);
                }
                if self.slice == 0 {
                    let _ = self
                        .shared
                        .encoding
                        .set(first.meta.content_encoding.clone());
                }
                Ok(resuming_stream(
                    store.clone(),
                    &loc.bucket,
                    &loc.key,
                    url,
                    range,
                    version,
                    Some(first.body),
                    self.policy,
                ))
            }
            Origin::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| Error::io(Op::Read, url, e))?;
                Ok(file_stream(Arc::new(file), start, end, url.clone()))
            }
        }
    }
}

/// `[start, end)` of a local file in pieces read on the blocking pool.
pub(super) fn file_stream(
    file: Arc<std::fs::File>,
    start: u64,
    end: u64,
    url: String,
) -> BoxByteStream {
    futures::stream::unfold(start, move |pos| {
        let (file, url) = (file.clone(), url.clone());
        async move {
            if pos >= end {
                return None;
            }
            let len = ((end - pos) as usize).min(FILE_PIECE);
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; len];
                let n = file.read_at(&mut buf, pos)?;
                buf.truncate(n);
                Ok::<_, io::Error>(buf)
            })
            .await;
            let r = match read {
                Ok(Ok(buf)) if buf.is_empty() => Err(Error::new(
                    ErrorKind::Integrity,
                    Op::Read,
                    &url,
                    format!("file ended at byte {pos} of {end} (truncated while read?)"),
                )),
                Ok(Ok(buf)) => Ok(Bytes::from(buf)),
                Ok(Err(e)) => Err(Error::io(Op::Read, &url, e)),
                Err(e) => Err(Error::new(ErrorKind::Io, Op::Read, &url, e.to_string())),
            };
            let next = match &r {
                Ok(b) => pos + b.len() as u64,
                Err(_) => end,
            };
            Some((r, next))
        }
    })
    .boxed()
}
