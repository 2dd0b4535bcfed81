//! Checksum helpers: the wire encodings of CRC32C and MD5, and combining
//! per-slice CRC32Cs into a whole-object one without re-reading data.
//!
//! Both GCS and S3 send CRC32C as base64 of the big-endian 4 bytes.
//!
//! S3 objects often carry another CRC instead ([`OtherCrc`]): CRC32 is
//! what boto3 and the AWS CLI send by default since 2025, and AWS computes
//! CRC64NVME for every new object uploaded without one, multipart ones
//! included. Those are the only whole-object checksum a multipart object
//! has (its ETag is not an MD5), so a download checks them, computed on
//! the way like CRC32C and combined over slices the same way. A multipart
//! object may instead have only a [`Composite`] checksum, the CRC of its
//! parts' CRCs, which [`PartSums`] computes from bytes cut at the parts'
//! boundaries.
//!
//! What a store keeps for one object is one [`Checksums`] value: the
//! rules of which to check and how two objects compare live there.

mod checksums;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub use checksums::{Checksum, Checksums, Mismatch};

/// Base64 of the big-endian CRC32C, as GCS and S3 headers carry it.
pub fn crc32c_to_base64(crc: u32) -> String {
    STANDARD.encode(crc.to_be_bytes())
}

/// Parses a base64 big-endian CRC32C; None if malformed.
pub fn crc32c_from_base64(s: &str) -> Option<u32> {
    let bytes = STANDARD.decode(s.trim()).ok()?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Base64 of an MD5 digest.
pub fn md5_to_base64(md5: &[u8; 16]) -> String {
    STANDARD.encode(md5)
}

/// Parses a base64 MD5; None if malformed.
pub fn md5_from_base64(s: &str) -> Option<[u8; 16]> {
    STANDARD.decode(s.trim()).ok()?.try_into().ok()
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 32 hex digits into an MD5 digest.
pub fn md5_from_hex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// CRC32C of `a ++ data` from `crc(a)`: every checksum shoal computes as
/// bytes stream by, so it is a visible share of a download's client CPU.
/// crc-fast's folding kernels (carry-less multiply, VPCLMULQDQ where the
/// CPU has it) outrun the `crc32c` crate's one-instruction-per-word loop
/// (figures in commit b42b2bf); carry-less multiply is everywhere x86-64
/// and aarch64 run, and crc-fast falls back to tables elsewhere. The
/// `crc32c` crate, the workspace's CRC32C dependency, still combines
/// slices' CRCs; both give the same values (a unit test checks every
/// split).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    // The running state is the finished CRC with its final xor undone.
    let mut d =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// CRC32C of `a ++ b` from `crc(a)`, `crc(b)` and `len(b)`.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    crc32c::crc32c_combine(crc_a, crc_b, len_b as usize)
}

/// Combines `(crc, len)` pieces in order into the CRC32C of their concatenation.
///
/// The first piece is the start, not combined onto an empty prefix: a
/// combine costs about a microsecond per call whatever the lengths, which a
/// one-slice object (every small file of a batch) need not pay.
pub fn crc32c_combine_all(pieces: impl IntoIterator<Item = (u32, u64)>) -> u32 {
    let mut pieces = pieces.into_iter();
    let Some((first, _)) = pieces.next() else {
        return 0;
    };
    pieces.fold(first, |acc, (crc, len)| crc32c_combine(acc, crc, len))
}

/// A whole-object CRC in an algorithm other than CRC32C (S3 keeps one
/// checksum algorithm per object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OtherCrc {
    /// CRC-32/ISO-HDLC (zlib's), header `x-amz-checksum-crc32`.
    Crc32(u32),
    /// CRC-64/NVME, header `x-amz-checksum-crc64nvme`.
    Crc64Nvme(u64),
}

/// The algorithm of an [`OtherCrc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrcKind {
    /// CRC-32/ISO-HDLC.
    Crc32,
    /// CRC-64/NVME.
    Crc64Nvme,
}

impl OtherCrc {
    /// Parses a header value (base64 of the big-endian bytes); None if
    /// malformed or of the wrong width.
    pub fn from_base64(kind: CrcKind, s: &str) -> Option<Self> {
        let bytes = STANDARD.decode(s.trim()).ok()?;
        match kind {
            CrcKind::Crc32 => Some(OtherCrc::Crc32(u32::from_be_bytes(bytes.try_into().ok()?))),
            CrcKind::Crc64Nvme => Some(OtherCrc::Crc64Nvme(u64::from_be_bytes(
                bytes.try_into().ok()?,
            ))),
        }
    }

    /// The algorithm.
    pub fn kind(self) -> CrcKind {
        match self {
            OtherCrc::Crc32(_) => CrcKind::Crc32,
            OtherCrc::Crc64Nvme(_) => CrcKind::Crc64Nvme,
        }
    }

    /// The value, widened.
    pub fn value(self) -> u64 {
        match self {
            OtherCrc::Crc32(v) => v as u64,
            OtherCrc::Crc64Nvme(v) => v,
        }
    }

    /// Base64 of the big-endian bytes, as S3 shows it.
    pub fn to_base64(self) -> String {
        match self {
            OtherCrc::Crc32(v) => STANDARD.encode(v.to_be_bytes()),
            OtherCrc::Crc64Nvme(v) => STANDARD.encode(v.to_be_bytes()),
        }
    }
}

impl std::fmt::Display for OtherCrc {
    /// `CRC32 1bJXzA== (d5b257cc)`: S3's spelling, then hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OtherCrc::Crc32(v) => write!(f, "{} ({v:08x})", self.to_base64()),
            OtherCrc::Crc64Nvme(v) => write!(f, "{} ({v:016x})", self.to_base64()),
        }
    }
}

impl CrcKind {
    /// The name S3 gives it (`CRC32`, `CRC64NVME`).
    pub fn name(self) -> &'static str {
        match self {
            CrcKind::Crc32 => "CRC32",
            CrcKind::Crc64Nvme => "CRC64NVME",
        }
    }

    fn algorithm(self) -> crc_fast::CrcAlgorithm {
        match self {
            CrcKind::Crc32 => crc_fast::CrcAlgorithm::Crc32IsoHdlc,
            CrcKind::Crc64Nvme => crc_fast::CrcAlgorithm::Crc64Nvme,
        }
    }

    /// The checksum of `data` in one go.
    pub fn checksum(self, data: &[u8]) -> OtherCrc {
        let mut d = self.digest();
        d.update(data);
        d.finish()
    }

    /// A running checksum of this kind.
    pub fn digest(self) -> CrcDigest {
        CrcDigest {
            kind: self,
            inner: crc_fast::Digest::new(self.algorithm()),
        }
    }

    /// The checksum of `a ++ b` from those of `a` and `b` and `len(b)`.
    pub fn combine(self, crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
        crc_fast::checksum_combine(self.algorithm(), crc_a, crc_b, len_b)
    }

    /// Combines `(crc, len)` pieces in order (like [`crc32c_combine_all`]).
    pub fn combine_all(self, pieces: impl IntoIterator<Item = (u64, u64)>) -> OtherCrc {
        let mut pieces = pieces.into_iter();
        let first = match pieces.next() {
            Some((crc, _)) => crc,
            None => self.digest().finish().value(),
        };
        self.of(pieces.fold(first, |acc, (crc, len)| self.combine(acc, crc, len)))
    }

    /// Combines per-slice pieces like [`Self::combine_all`]; None if any
    /// slice did not compute one.
    pub fn combine_known(
        self,
        pieces: impl IntoIterator<Item = Option<(u64, u64)>>,
    ) -> Option<OtherCrc> {
        let pieces: Option<Vec<(u64, u64)>> = pieces.into_iter().collect();
        Some(self.combine_all(pieces?))
    }

    /// Wraps a value computed for this kind.
    pub fn of(self, value: u64) -> OtherCrc {
        match self {
            CrcKind::Crc32 => OtherCrc::Crc32(value as u32),
            CrcKind::Crc64Nvme => OtherCrc::Crc64Nvme(value),
        }
    }
}

/// A running [`CrcKind`] checksum (SIMD; ~tens of GB/s, like CRC32C).
#[derive(Clone, Copy)]
pub struct CrcDigest {
    kind: CrcKind,
    inner: crc_fast::Digest,
}

impl std::fmt::Debug for CrcDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CrcDigest({})", self.kind.name())
    }
}

impl CrcDigest {
    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.inner.update(data);
    }

    /// The checksum of everything added.
    pub fn finish(&self) -> OtherCrc {
        self.kind.of(self.inner.finalize())
    }
}

/// The checksums of bytes as they arrive: always their CRC32C (combined
/// over slices, kept in resume journals, passed on to uploads), the
/// store's other CRC when that is what it has for the object, and the
/// per-part CRCs when it has a composite one.
#[derive(Debug, Clone, Default)]
pub struct Running {
    /// CRC32C of everything added.
    pub crc32c: u32,
    other: Option<CrcDigest>,
    parts: Option<PartSums>,
}

impl Running {
    /// Checksums to compute: CRC32C, and `other` when given.
    pub fn new(other: Option<CrcKind>) -> Self {
        Running {
            crc32c: 0,
            other: other.map(CrcKind::digest),
            parts: None,
        }
    }

    /// Also the per-part CRCs, from `parts` (set at the offset these
    /// bytes start from).
    pub fn with_parts(mut self, parts: Option<PartSums>) -> Self {
        self.parts = parts;
        self
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.crc32c = crc32c_append(self.crc32c, data);
        if let Some(d) = &mut self.other {
            d.update(data);
        }
        if let Some(p) = &mut self.parts {
            p.update(data);
        }
    }

    /// The other CRC of everything added, when asked for.
    pub fn other(&self) -> Option<OtherCrc> {
        self.other.map(|d| d.finish())
    }

    /// The per-part pieces, when asked for (taken: a second call gives None).
    pub fn take_parts(&mut self) -> Option<Vec<PartPiece>> {
        self.parts.take().map(PartSums::finish)
    }
}

/// The algorithm of an S3 COMPOSITE checksum: S3 composes CRC32C and
/// CRC32 (CRC64NVME is full-object only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// CRC-32C (Castagnoli), header `x-amz-checksum-crc32c`.
    Crc32c,
    /// CRC-32/ISO-HDLC, header `x-amz-checksum-crc32`.
    Crc32,
}

impl PartKind {
    /// The name S3 gives it.
    pub fn name(self) -> &'static str {
        match self {
            PartKind::Crc32c => "CRC32C",
            PartKind::Crc32 => "CRC32",
        }
    }

    fn algorithm(self) -> crc_fast::CrcAlgorithm {
        match self {
            PartKind::Crc32c => crc_fast::CrcAlgorithm::Crc32Iscsi,
            PartKind::Crc32 => crc_fast::CrcAlgorithm::Crc32IsoHdlc,
        }
    }

    /// The CRC of `data` in one go.
    pub fn checksum(self, data: &[u8]) -> u32 {
        crc_fast::checksum(self.algorithm(), data) as u32
    }

    /// The CRC of `a ++ b` from those of `a` and `b` and `len(b)`.
    pub fn combine(self, crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
        crc_fast::checksum_combine(self.algorithm(), crc_a as u64, crc_b as u64, len_b) as u32
    }
}

/// S3's COMPOSITE checksum of a multipart object, written `xxxx-N`: the
/// CRC of its N parts' CRCs (each as 4 big-endian bytes, in part order).
/// It is what boto3 and the AWS CLI leave on every multipart upload, and
/// what servers without full-object checksums store. It proves nothing
/// about the bytes without the part boundaries, which the store tells
/// apart ([`crate::MultipartStore::parts`]); with them, the CRC of each part of the
/// bytes received composes into a value to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Composite {
    /// The algorithm of the parts' CRCs and of the CRC over them.
    pub kind: PartKind,
    /// The CRC of the parts' CRCs.
    pub value: u32,
    /// How many parts.
    pub parts: u32,
}

impl Composite {
    /// Parses a header value (`vm5fpQ==-4`); None if it is not composite
    /// or malformed.
    pub fn from_header(kind: PartKind, s: &str) -> Option<Self> {
        let (b64, parts) = s.trim().rsplit_once('-')?;
        let bytes = STANDARD.decode(b64).ok()?;
        Some(Composite {
            kind,
            value: u32::from_be_bytes(bytes.try_into().ok()?),
            parts: parts.parse().ok().filter(|&n| n > 0)?,
        })
    }

    /// The composite of these part CRCs, in part order.
    pub fn of_parts(kind: PartKind, crcs: &[u32]) -> Self {
        let bytes: Vec<u8> = crcs.iter().flat_map(|c| c.to_be_bytes()).collect();
        Composite {
            kind,
            value: kind.checksum(&bytes),
            parts: crcs.len() as u32,
        }
    }
}

impl std::fmt::Display for Composite {
    /// `vm5fpQ==-4`, S3's spelling.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-{}",
            STANDARD.encode(self.value.to_be_bytes()),
            self.parts
        )
    }
}

/// The CRC of one part's bytes within a run of bytes ([`PartSums`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartPiece {
    /// The part (0-based).
    pub part: usize,
    /// CRC of the piece.
    pub crc: u32,
    /// Its length.
    pub len: u64,
}

/// Per-part CRCs of bytes that arrive in order from some offset: a slice
/// of a download cuts its CRC at every part boundary inside it, so slices
/// need not line up with parts. The pieces of one part, from one slice or
/// several, combine into that part's CRC ([`part_crcs`]).
#[derive(Debug, Clone)]
pub struct PartSums {
    kind: PartKind,
    /// Where each part ends (exclusive), ascending.
    ends: std::sync::Arc<[u64]>,
    pos: u64,
    part: usize,
    crc: crc_fast::Digest,
    len: u64,
    pieces: Vec<PartPiece>,
}

impl PartSums {
    /// Bytes from offset `start` of an object whose parts end at `ends`.
    pub fn new(kind: PartKind, ends: std::sync::Arc<[u64]>, start: u64) -> Self {
        let part = ends.partition_point(|&e| e <= start);
        PartSums {
            kind,
            ends,
            pos: start,
            part,
            crc: crc_fast::Digest::new(kind.algorithm()),
            len: 0,
            pieces: Vec::new(),
        }
    }

    /// Adds the next bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // Bytes past the last part stay in one piece after it, which
            // the part count then refuses.
            let room = match self.ends.get(self.part) {
                Some(&end) => end - self.pos,
                None => u64::MAX,
            };
            let n = (data.len() as u64).min(room) as usize;
            self.crc.update(&data[..n]);
            self.len += n as u64;
            self.pos += n as u64;
            data = &data[n..];
            if self.ends.get(self.part) == Some(&self.pos) {
                self.cut();
                self.part += 1;
            }
        }
    }

    fn cut(&mut self) {
        if self.len > 0 {
            self.pieces.push(PartPiece {
                part: self.part,
                crc: self.crc.finalize() as u32,
                len: self.len,
            });
        }
        self.crc = crc_fast::Digest::new(self.kind.algorithm());
        self.len = 0;
    }

    /// The pieces, in offset order.
    pub fn finish(mut self) -> Vec<PartPiece> {
        self.cut();
        self.pieces
    }
}

/// Each part's CRC from pieces in offset order (every piece of a part
/// next to the others), with its length: one entry per part seen.
pub fn part_crcs(kind: PartKind, pieces: &[PartPiece]) -> Vec<(usize, u32, u64)> {
    let mut out: Vec<(usize, u32, u64)> = Vec::new();
    for p in pieces {
        match out.last_mut() {
            Some((part, crc, len)) if *part == p.part => {
                *crc = kind.combine(*crc, p.crc, p.len);
                *len += p.len;
            }
            _ => out.push((p.part, p.crc, p.len)),
        }
    }
    out
}

/// An MD5 hasher (only where a protocol has nothing better).
pub fn md5_digest(data: &[u8]) -> [u8; 16] {
    use md5::Digest;
    md5::Md5::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_append_matches_the_reference_at_every_split() {
        let data: Vec<u8> = (0..200_003u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let whole = crc32c::crc32c(&data);
        assert_eq!(crc32c_append(0, &data), whole);
        assert_eq!(crc32c_append(0, b""), 0);
        assert_eq!(crc32c_append(0, b"123456789"), 0xE306_9283);
        for cut in [0, 1, 7, 64, 4095, 65_536, 100_000, 199_999, 200_003] {
            let a = crc32c_append(0, &data[..cut]);
            assert_eq!(a, crc32c::crc32c(&data[..cut]), "cut {cut}");
            assert_eq!(crc32c_append(a, &data[cut..]), whole, "cut {cut}");
        }
    }

    #[test]
    fn base64_round_trip_matches_gcs_examples() {
        // GCS documents crc32c of "hello world\n"? We check against the crate.
        let crc = crc32c::crc32c(b"hello");
        assert_eq!(crc32c_from_base64(&crc32c_to_base64(crc)), Some(crc));
        // Known value: CRC32C("123456789") = 0xE3069283.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_to_base64(0xE306_9283), "4waSgw==");
    }

    #[test]
    fn combine_equals_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = crc32c::crc32c(&data);
        let cuts = [0usize, 1, 4096, 33_333, 99_999, 100_000];
        let pieces = cuts
            .windows(2)
            .map(|w| (crc32c::crc32c(&data[w[0]..w[1]]), (w[1] - w[0]) as u64));
        assert_eq!(crc32c_combine_all(pieces), whole);
        assert_eq!(crc32c_combine_all([(whole, data.len() as u64)]), whole);
        assert_eq!(crc32c_combine_all([]), crc32c::crc32c(b""));
        let empty_first = [(0, 0), (whole, data.len() as u64)];
        assert_eq!(crc32c_combine_all(empty_first), whole);
    }

    /// The catalogue check values ("123456789") of both algorithms, S3's
    /// encoding of them, and combining pieces into the whole.
    #[test]
    fn other_crcs_match_their_check_values_and_combine() {
        let check = |kind: CrcKind| {
            let mut d = kind.digest();
            d.update(b"1234");
            d.update(b"56789");
            d.finish()
        };
        assert_eq!(check(CrcKind::Crc32), OtherCrc::Crc32(0xCBF4_3926));
        assert_eq!(
            check(CrcKind::Crc64Nvme),
            OtherCrc::Crc64Nvme(0xAE8B_1486_0A79_9888)
        );
        for kind in [CrcKind::Crc32, CrcKind::Crc64Nvme] {
            let c = check(kind);
            assert_eq!(OtherCrc::from_base64(kind, &c.to_base64()), Some(c));
            let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
            let piece = |r: std::ops::Range<usize>| {
                let mut d = kind.digest();
                d.update(&data[r.clone()]);
                (d.finish().value(), r.len() as u64)
            };
            let whole = kind.combine_all([piece(0..data.len())]);
            let cut = kind.combine_all([piece(0..1), piece(1..4096), piece(4096..100_000)]);
            assert_eq!(cut, whole);
            assert_eq!(kind.combine_all([]), kind.digest().finish());
        }
        // Widths are checked: a CRC32 value is not a CRC64NVME one.
        assert_eq!(OtherCrc::from_base64(CrcKind::Crc64Nvme, "1bJXzA=="), None);
        assert_eq!(
            OtherCrc::from_base64(CrcKind::Crc32, "1bJXzA=="),
            Some(OtherCrc::Crc32(0xd5b2_57cc))
        );
    }

    /// MinIO's answer for a 4-part object boto3 uploaded: the composite
    /// header and, from GetObjectAttributes, the parts' CRC32s.
    #[test]
    fn a_composite_is_the_crc_of_its_parts_crcs() {
        let c = Composite::from_header(PartKind::Crc32, "vm5fpQ==-4").unwrap();
        assert_eq!((c.value, c.parts), (0xbe6e_5fa5, 4));
        assert_eq!(c.to_string(), "vm5fpQ==-4");
        let parts = [0x59f5_63ef, 0xe529_28d8, 0x8998_18fe, 0x2725_7130];
        assert_eq!(Composite::of_parts(PartKind::Crc32, &parts), c);
        for bad in ["vm5fpQ==", "vm5fpQ==-0", "vm5fpQ==-x", "vm5f-4", "-4"] {
            assert_eq!(Composite::from_header(PartKind::Crc32, bad), None, "{bad}");
        }
        assert_eq!(PartKind::Crc32c.checksum(b"123456789"), 0xE306_9283);
        assert_eq!(PartKind::Crc32.checksum(b"123456789"), 0xCBF4_3926);
    }

    /// Bytes fed in runs that do not line up with the parts (as download
    /// slices do not) give the same part CRCs as each part's bytes alone,
    /// and those compose into what zlib gives for the same parts.
    #[test]
    fn part_sums_cut_at_part_boundaries_whatever_the_runs() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let ends: std::sync::Arc<[u64]> = vec![30_000, 60_000, 90_000, 100_000].into();
        for kind in [PartKind::Crc32c, PartKind::Crc32] {
            let want: Vec<u32> = [0..30_000, 30_000..60_000, 60_000..90_000, 90_000..100_000]
                .into_iter()
                .map(|r| kind.checksum(&data[r]))
                .collect();
            // Runs cut at 0, 7, 29_999, 30_000, 45_000, 99_000 (the last one
            // spans two boundaries), each fed in uneven chunks.
            let runs = [0usize, 7, 29_999, 30_000, 45_000, 99_000, 100_000];
            let mut pieces = Vec::new();
            for w in runs.windows(2) {
                let mut sums = PartSums::new(kind, ends.clone(), w[0] as u64);
                for chunk in data[w[0]..w[1]].chunks(4_093) {
                    sums.update(chunk);
                }
                pieces.extend(sums.finish());
            }
            let got = part_crcs(kind, &pieces);
            let crcs: Vec<u32> = got.iter().map(|&(_, c, _)| c).collect();
            assert_eq!(crcs, want, "{kind:?}");
            let lens: Vec<u64> = got.iter().map(|&(_, _, l)| l).collect();
            assert_eq!(lens, [30_000, 30_000, 30_000, 10_000]);
        }
        let crcs: Vec<u32> = part_crcs(PartKind::Crc32, &{
            let mut s = PartSums::new(PartKind::Crc32, ends.clone(), 0);
            s.update(&data);
            s.finish()
        })
        .iter()
        .map(|&(_, c, _)| c)
        .collect();
        assert_eq!(
            Composite::of_parts(PartKind::Crc32, &crcs).to_string(),
            "PAxSqQ==-4"
        );
        // Bytes past the last part make a piece of a part that is not there.
        let mut s = PartSums::new(PartKind::Crc32, ends, 99_990);
        s.update(&[0; 20]);
        let p = s.finish();
        assert_eq!(
            p.iter().map(|p| (p.part, p.len)).collect::<Vec<_>>(),
            [(3, 10), (4, 10)]
        );
    }

    #[test]
    fn md5_hex_round_trip() {
        let d = md5_digest(b"abc");
        assert_eq!(hex(&d), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5_from_hex(&hex(&d)), Some(d));
        assert_eq!(md5_from_base64(&md5_to_base64(&d)), Some(d));
    }
}
