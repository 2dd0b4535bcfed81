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
//! the way like CRC32C and combined over slices the same way.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

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
/// over slices, kept in resume journals, passed on to uploads), and the
/// store's other CRC when that is what it has for the object.
#[derive(Debug, Clone, Copy, Default)]
pub struct Running {
    /// CRC32C of everything added.
    pub crc32c: u32,
    other: Option<CrcDigest>,
}

impl Running {
    /// Checksums to compute: CRC32C, and `other` when given.
    pub fn new(other: Option<CrcKind>) -> Self {
        Running {
            crc32c: 0,
            other: other.map(CrcKind::digest),
        }
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.crc32c = crc32c::crc32c_append(self.crc32c, data);
        if let Some(d) = &mut self.other {
            d.update(data);
        }
    }

    /// The other CRC of everything added, when asked for.
    pub fn other(&self) -> Option<OtherCrc> {
        self.other.map(|d| d.finish())
    }
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

    #[test]
    fn md5_hex_round_trip() {
        let d = md5_digest(b"abc");
        assert_eq!(hex(&d), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5_from_hex(&hex(&d)), Some(d));
        assert_eq!(md5_from_base64(&md5_to_base64(&d)), Some(d));
    }
}
