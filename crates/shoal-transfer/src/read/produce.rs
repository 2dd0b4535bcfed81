//! The decoder thread of one object: pulls the compressed slices in order
//! through a `BufRead` over the channels and pushes decoded blocks out.

use super::*;

/// The decoding thread of one object: picks the codec from its first bytes
/// and pushes decoded blocks (or, for plain bytes, the fetched chunks as
/// they are) to the reader.
pub(super) fn produce(
    mut input: SliceReader,
    shared: &Shared,
    mode: Decompress,
    cap: usize,
    pool: &Arc<BlockPool>,
    out: &UnboundedSender<Result<Chunk>>,
    handle: &tokio::runtime::Handle,
) -> Result<()> {
    let url = shared.url.as_str();
    let head = input
        .peek(MAGIC_LEN)
        .map_err(|e| input.fetch_error(url, e))?;
    let encoding = shared.encoding.get().cloned().flatten();
    let codec = decode::choose(mode, encoding.as_deref(), &head, &shared.meta.key);
    if codec == Codec::Plain {
        while let Some((data, hold)) = input.next_piece().map_err(|e| input.fetch_error(url, e))? {
            if out.send(Ok(Chunk::held(data, hold))).is_err() {
                return Ok(());
            }
        }
        return shared.check_crc(input.md5_digest());
    }
    let cap_sem = Arc::new(Semaphore::new(cap));
    let mut dec = DecodeState {
        input: &mut input,
        codec,
    };
    let pump = |reader: &mut dyn Read| -> io::Result<()> {
        loop {
            if shared.cancelled.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut buf = pool.take();
            let mut filled = 0;
            let mut failed = None;
            while filled < BLOCK {
                match reader.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            buf.truncate(filled);
            // From here on, dropping the chunk gives the block back.
            let mut chunk = Chunk {
                data: buf.freeze(),
                _hold: None,
                pool: Some(pool.clone()),
            };
            if let Some(e) = failed {
                return Err(e);
            }
            if filled == 0 {
                return Ok(());
            }
            let Ok(hold) = handle.block_on(cap_sem.clone().acquire_many_owned(filled as u32))
            else {
                return Ok(());
            };
            chunk._hold = Some(hold);
            if out.send(Ok(chunk)).is_err() {
                return Ok(());
            }
        }
    };
    match decode::with_decoder(codec, &mut dec, pump) {
        Err(e) => return Err(decode::decode_error(codec, url, 0, &e)),
        Ok(Err(e)) => return Err(dec.error(url, &e)),
        Ok(Ok(())) => {}
    }
    if shared.cancelled.load(Ordering::Relaxed) {
        return Ok(());
    }
    shared.check_crc(input.md5_digest())
}

/// The decoder's input, with what is needed to word its errors.
pub(super) struct DecodeState<'a> {
    pub(super) input: &'a mut SliceReader,
    pub(super) codec: Codec,
}

impl DecodeState<'_> {
    pub(super) fn error(&mut self, url: &str, e: &io::Error) -> Error {
        if let Some(fetch) = self.input.error.take() {
            return fetch;
        }
        decode::decode_error(self.codec, url, self.input.consumed, e)
    }
}

impl Read for &mut DecodeState<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl BufRead for &mut DecodeState<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.input.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.input.consume(n)
    }
}

/// An object's compressed bytes as a `BufRead`: its slices' channels, one
/// after the other, read on the decoding thread. Counts what the decoder
/// consumed (for error offsets) and releases each chunk's budget share
/// once consumed.
pub(super) struct SliceReader {
    pub(super) slices: VecDeque<UnboundedReceiver<Piece>>,
    pub(super) cur: Option<(Bytes, Option<OwnedSemaphorePermit>)>,
    pub(super) pos: usize,
    pub(super) consumed: u64,
    pub(super) error: Option<Error>,
    /// Every compressed piece passes here once, in order.
    pub(super) md5: Md5InOrder,
    pub(super) shared: Arc<Shared>,
}

impl SliceReader {
    /// The MD5 of the pieces received, if the object expects one.
    pub(super) fn md5_digest(&mut self) -> Option<[u8; 16]> {
        std::mem::take(&mut self.md5).finish(&self.shared.expected())
    }

    /// The next chunk from the channels.
    pub(super) fn recv_piece(
        &mut self,
    ) -> io::Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>> {
        loop {
            let Some(rx) = self.slices.front_mut() else {
                return Ok(None);
            };
            match rx.blocking_recv() {
                Some(Ok(p)) if p.0.is_empty() => {}
                Some(Ok(p)) => {
                    let shared = &self.shared;
                    self.md5.update(|| shared.expected(), &p.0);
                    return Ok(Some(p));
                }
                Some(Err(e)) => {
                    self.slices.clear();
                    let msg = e.to_string();
                    self.error = Some(e);
                    return Err(io::Error::other(msg));
                }
                None => {
                    self.slices.pop_front();
                }
            }
        }
    }

    /// The next chunk whole, for bytes passed through (the unread rest of
    /// the current one first).
    pub(super) fn next_piece(
        &mut self,
    ) -> io::Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>> {
        if let Some((data, hold)) = self.cur.take() {
            let pos = std::mem::take(&mut self.pos);
            if pos < data.len() {
                self.consumed += (data.len() - pos) as u64;
                return Ok(Some((data.slice(pos..), hold)));
            }
        }
        let p = self.recv_piece()?;
        if let Some((d, _)) = &p {
            self.consumed += d.len() as u64;
        }
        Ok(p)
    }

    /// The first `n` bytes (fewer if the object is shorter), joining
    /// chunks if the first is shorter, left unconsumed. Call before any
    /// read.
    pub(super) fn peek(&mut self, n: usize) -> io::Result<Bytes> {
        let mut pieces = Vec::new();
        let mut total = 0;
        while total < n {
            match self.recv_piece()? {
                Some(p) => {
                    total += p.0.len();
                    pieces.push(p);
                }
                None => break,
            }
        }
        let cur = if pieces.len() <= 1 {
            pieces.pop()
        } else {
            let mut data = Vec::with_capacity(total);
            let mut hold: Option<OwnedSemaphorePermit> = None;
            for (d, h) in pieces {
                data.extend_from_slice(&d);
                match (&mut hold, h) {
                    (Some(a), Some(b)) => a.merge(b),
                    (a @ None, b) => *a = b,
                    _ => {}
                }
            }
            Some((Bytes::from(data), hold))
        };
        let peek = cur
            .as_ref()
            .map(|(d, _)| d.slice(..n.min(d.len())))
            .unwrap_or_default();
        self.cur = cur;
        self.pos = 0;
        Ok(peek)
    }

    pub(super) fn fetch_error(&mut self, url: &str, e: io::Error) -> Error {
        self.error
            .take()
            .unwrap_or_else(|| Error::new(ErrorKind::Io, Op::Read, url, e.to_string()))
    }
}

impl Read for SliceReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let have = self.fill_buf()?;
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for SliceReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let exhausted = self.cur.as_ref().is_none_or(|(d, _)| self.pos >= d.len());
        if exhausted {
            self.cur = None;
            match self.recv_piece()? {
                Some(p) => {
                    self.cur = Some(p);
                    self.pos = 0;
                }
                None => return Ok(&[]),
            }
        }
        let (d, _) = self.cur.as_ref().expect("filled above");
        let end = d.len().min(self.pos + MAX_FEED);
        Ok(&d[self.pos..end])
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        self.consumed += n as u64;
        if self.cur.as_ref().is_some_and(|(d, _)| self.pos >= d.len()) {
            self.cur = None;
            self.pos = 0;
        }
    }
}
