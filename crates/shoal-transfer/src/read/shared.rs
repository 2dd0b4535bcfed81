//! What the fetchers, the decoder thread and the reader share about one
//! object: its pieces in order, its budget, its checksums.

use super::*;

pub(super) type Piece = Result<(Bytes, Option<OwnedSemaphorePermit>)>;

/// What an object's fetch tasks, its decoder and its reader share.
pub(super) struct Shared {
    pub(super) index: usize,
    pub(super) url: String,
    pub(super) meta: ObjectMeta,
    /// `Content-Encoding`: from the listing, else from the first response.
    pub(super) encoding: OnceLock<Option<String>>,
    /// The checksum to check: from the listing, else learnt by the
    /// first slice from its response (an S3 listing never has one).
    pub(super) expected: OnceLock<Expected>,
    /// What each slice's bytes give, once it has them all.
    pub(super) got: Mutex<Vec<Option<Received>>>,
    /// True once the first slice has learnt what `expected` can
    /// hold (or gave up). The other slices of the object wait for it
    /// before they hash a byte: which CRC to compute and where the parts
    /// end must be known from the start.
    pub(super) learnt: tokio::sync::watch::Sender<bool>,
    pub(super) slices_left: AtomicUsize,
    pub(super) cancelled: AtomicBool,
    pub(super) ready: UnboundedSender<usize>,
    /// The decoding turn (see [`run_decoders`]), returned when the reader
    /// drops the object.
    pub(super) turn: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Shared {
    /// The checksum to check: learnt by the first slice, else the
    /// listing's.
    pub(super) fn expected(&self) -> Expected {
        match self.expected.get() {
            Some(e) => e.clone(),
            None => Expected::listed(&self.meta),
        }
    }

    /// Compares the fetched bytes, combined over slices (and `md5`, their
    /// MD5 in order when the object expects one), with what the store
    /// keeps ([`Expected::check_md5`]).
    pub(super) fn check_crc(&self, md5: Option<[u8; 16]>) -> Result<()> {
        let got = self.got.lock().unwrap();
        if got.iter().any(Option::is_none) {
            return Ok(()); // a slice failed and said so
        }
        let got = Received::combine(got.iter().flatten());
        (self
            .expected()
            .check_md5(&got, md5, Op::Read, &self.url, ""))
        .map(drop)
    }
}
