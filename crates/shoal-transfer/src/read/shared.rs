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
    pub(super) crcs: Mutex<Vec<Option<(u32, u64)>>>,
    /// The store's checksums (CRC32C, other CRC) from the first response,
    /// when the listing had none (an S3 listing never has).
    pub(super) stored: OnceLock<(Option<u32>, Option<OtherCrc>)>,
    /// Each slice's other CRC, when the store has only that.
    pub(super) others: Mutex<Vec<Option<u64>>>,
    /// For an object whose only checksum is composite: the check, learnt
    /// by the first slice, and each slice's part pieces.
    pub(super) parts: OnceLock<PartCheck>,
    pub(super) pieces: Mutex<Vec<Option<Vec<PartPiece>>>>,
    /// True once the first slice has learnt what `stored` and `parts` can
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
    /// The store's CRC32C and other CRC: from the listing, else from the
    /// first response.
    pub(super) fn stored(&self) -> (Option<u32>, Option<OtherCrc>) {
        match self.stored.get() {
            Some(&s) => s,
            None => (self.meta.crc32c, self.meta.other_crc),
        }
    }

    /// The other CRC to compute while fetching, for a store that has only
    /// that (combined over slices like CRC32C).
    pub(super) fn other_kind(&self) -> Option<CrcKind> {
        match self.stored() {
            (None, Some(other)) => Some(other.kind()),
            _ => None,
        }
    }

    /// Compares the fetched bytes' checksums, combined over slices, with
    /// the strongest the store has (see [`check_received`]).
    pub(super) fn check_crc(&self) -> Result<()> {
        let crcs = self.crcs.lock().unwrap();
        if crcs.iter().any(Option::is_none) {
            return Ok(()); // a slice failed and said so
        }
        let crcs: Vec<(u32, u64)> = crcs.iter().flatten().copied().collect();
        let got = Received::of_slices(
            &crcs,
            self.other_kind(),
            &self.others.lock().unwrap(),
            &self.pieces.lock().unwrap(),
        );
        let (want, other) = self.stored();
        check_received(want, other, self.parts.get(), &got, Op::Read, &self.url, "").map(drop)
    }
}
