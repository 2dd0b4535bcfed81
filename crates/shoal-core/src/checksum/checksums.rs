//! The checksums a store keeps for one object, as one value.
//!
//! Stores disagree on what they keep: GCS a CRC32C and an MD5 (no MD5 for
//! composed objects), S3 one CRC per object (CRC32C from shoal, CRC32 from
//! boto3 and the AWS CLI, CRC64NVME from AWS itself) or, for a multipart
//! upload, a composite `xxxx-N`, and an ETag that is an MD5 only for
//! single-part uploads. As four loose fields of `ObjectMeta` every engine
//! picked among them itself, so the rules (which one to trust, what two
//! objects sharing one prove) and the words of a mismatch were written out
//! again wherever bytes were checked. [`Checksums`] keeps what the store
//! gave, hands it out strongest first, and is the one place where two
//! objects' checksums are compared and a mismatch is worded ([`Mismatch`]).
//!
//! The order is the verification policy: a CRC32C first (every transfer
//! computes one anyway, so checking it is free), then the other CRC (S3
//! keeps one algorithm per object; computed on the way too), then the
//! composite (checking it needs the part boundaries, a request), then MD5
//! (slices cannot combine it: a second pass over the bytes).
//!
//! The value is four options, not a list: a listing makes one per object,
//! millions in a run, and a list would allocate for each.

use super::{Composite, OtherCrc, hex};

/// One checksum a store keeps for an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// CRC32C of the whole object.
    Crc32c(u32),
    /// CRC32 or CRC64NVME of the whole object (S3).
    Other(OtherCrc),
    /// The CRC of an S3 multipart object's part CRCs (`xxxx-N`).
    Composite(Composite),
    /// MD5 of the whole object.
    Md5([u8; 16]),
}

impl Checksum {
    /// The algorithm's name as the stores spell it (`CRC32C`, `CRC32`,
    /// `CRC64NVME`, `MD5`; a composite's is that of its parts' CRCs).
    pub fn name(&self) -> &'static str {
        match self {
            Checksum::Crc32c(_) => "CRC32C",
            Checksum::Other(o) => o.kind().name(),
            Checksum::Composite(c) => c.kind.name(),
            Checksum::Md5(_) => "MD5",
        }
    }

    /// Whether `other` is a value of the same algorithm, so the two can be
    /// compared.
    fn same_kind(&self, other: &Checksum) -> bool {
        match (self, other) {
            (Checksum::Other(a), Checksum::Other(b)) => a.kind() == b.kind(),
            (Checksum::Composite(a), Checksum::Composite(b)) => a.kind == b.kind,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl std::fmt::Display for Checksum {
    /// The value as messages show it: hex for a CRC32C and an MD5, S3's
    /// base64 then hex for the other CRCs, `vm5fpQ==-4` for a composite.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Checksum::Crc32c(c) => write!(f, "{c:08x}"),
            Checksum::Other(o) => o.fmt(f),
            Checksum::Composite(c) => c.fmt(f),
            Checksum::Md5(m) => f.write_str(&hex(m)),
        }
    }
}

/// The checksums a store gave for one object, strongest first (see the
/// module doc). Backends fill it from the server's answer with the `with_`
/// methods; engines ask it which one to check and how two objects compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksums {
    crc32c: Option<u32>,
    other: Option<OtherCrc>,
    composite: Option<Composite>,
    md5: Option<[u8; 16]>,
}

impl Checksums {
    /// With this CRC32C (None: without one).
    pub fn with_crc32c(mut self, crc: impl Into<Option<u32>>) -> Self {
        self.crc32c = crc.into();
        self
    }

    /// With this CRC32 or CRC64NVME (None: without one).
    pub fn with_other_crc(mut self, crc: impl Into<Option<OtherCrc>>) -> Self {
        self.other = crc.into();
        self
    }

    /// With this composite checksum (None: without one).
    pub fn with_composite(mut self, c: impl Into<Option<Composite>>) -> Self {
        self.composite = c.into();
        self
    }

    /// With this MD5 (None: without one).
    pub fn with_md5(mut self, md5: impl Into<Option<[u8; 16]>>) -> Self {
        self.md5 = md5.into();
        self
    }

    /// These, with the CRCs (whole or composite) of `answer` instead of
    /// their own: what a GET's headers say beside a listing's entry, whose
    /// MD5 stays.
    pub fn with_crcs_from(self, answer: &Checksums) -> Self {
        Checksums {
            crc32c: answer.crc32c,
            other: answer.other,
            composite: answer.composite,
            md5: self.md5,
        }
    }

    /// The CRC32C, when the store keeps one: the checksum shoal computes
    /// for every transfer, resumes from and sends with uploads.
    pub fn crc32c(&self) -> Option<u32> {
        self.crc32c
    }

    /// The CRC32 or CRC64NVME, when the store keeps one.
    pub fn other_crc(&self) -> Option<OtherCrc> {
        self.other
    }

    /// The composite checksum, when the store keeps one.
    pub fn composite(&self) -> Option<Composite> {
        self.composite
    }

    /// The MD5, when the store keeps one.
    pub fn md5(&self) -> Option<[u8; 16]> {
        self.md5
    }

    /// Every checksum, strongest first.
    pub fn iter(&self) -> impl Iterator<Item = Checksum> + use<> {
        [
            self.crc32c.map(Checksum::Crc32c),
            self.other.map(Checksum::Other),
            self.composite.map(Checksum::Composite),
            self.md5.map(Checksum::Md5),
        ]
        .into_iter()
        .flatten()
    }

    /// The checksum to verify the object's bytes against.
    pub fn strongest(&self) -> Option<Checksum> {
        self.iter().next()
    }

    /// The checksums of the whole object's bytes, strongest first: all but
    /// a composite one, which describes them only with the part boundaries.
    pub fn whole(&self) -> impl Iterator<Item = Checksum> + use<> {
        self.iter().filter(|c| !matches!(c, Checksum::Composite(_)))
    }

    /// Whether the store gave none.
    pub fn is_empty(&self) -> bool {
        self.strongest().is_none()
    }

    /// The strongest whole-object checksum both have (of one algorithm):
    /// `Ok` with it when the values are equal, else the [`Mismatch`] of
    /// `self`'s (wanted) and `other`'s (got). None when they share none.
    /// Composite values are left out: different ones may only mean
    /// different part sizes ([`Checksums::same_content`] says what equal
    /// ones mean).
    pub fn common(&self, other: &Checksums) -> Option<Result<Checksum, Mismatch>> {
        self.whole().find_map(|want| {
            let got = other.whole().find(|got| got.same_kind(&want))?;
            Some(match want == got {
                true => Ok(want),
                false => Err(Mismatch::new(want, got)),
            })
        })
    }

    /// Whether two objects hold the same bytes, as far as their checksums
    /// say: by the strongest whole-object one both have, else equal
    /// composite values (equal part CRCs composed: equal bytes). None when
    /// they cannot say (no common checksum, or composites that differ,
    /// which may be the same bytes cut into other parts).
    pub fn same_content(&self, other: &Checksums) -> Option<bool> {
        if let Some(r) = self.common(other) {
            return Some(r.is_ok());
        }
        match (self.composite, other.composite) {
            (Some(x), Some(y)) if x == y => Some(true),
            _ => None,
        }
    }
}

/// Bytes that do not match a checksum: the one wording of every mismatch
/// (`CRC32C mismatch: the store says 0a1b2c3d, the bytes received give
/// …`). Which sides were compared, and where, vary with the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    name: &'static str,
    want: String,
    got: String,
    at: Option<String>,
    sides: (&'static str, &'static str),
}

impl Mismatch {
    /// `want` (the store's) against `got` (the bytes').
    pub fn new(want: Checksum, got: Checksum) -> Self {
        Mismatch {
            name: want.name(),
            want: want.to_string(),
            got: got.to_string(),
            at: None,
            sides: ("the store says", "the bytes received give"),
        }
    }

    /// One part's CRC (`name`, as 8 hex digits) against the bytes' for
    /// that part, `at` saying which part.
    pub fn of_part(name: &'static str, at: String, want: u32, got: u32) -> Self {
        Mismatch {
            at: Some(at),
            name,
            want: format!("{want:08x}"),
            got: format!("{got:08x}"),
            ..Mismatch::new(Checksum::Crc32c(want), Checksum::Crc32c(got))
        }
    }

    /// The words that introduce each side, when not the store's and the
    /// bytes received (`the store computed`, `the bytes sent give`).
    pub fn sides(mut self, want: &'static str, got: &'static str) -> Self {
        self.sides = (want, got);
        self
    }

    /// The algorithm's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The wanted value, as shown.
    pub fn want(&self) -> &str {
        &self.want
    }

    /// The value the bytes gave, as shown.
    pub fn got(&self) -> &str {
        &self.got
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Mismatch {
            name,
            want,
            got,
            at,
            sides: (want_is, got_is),
        } = self;
        match at {
            Some(at) => write!(f, "{name} mismatch in {at}: ")?,
            None => write!(f, "{name} mismatch: ")?,
        }
        write!(f, "{want_is} {want}, {got_is} {got}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{CrcKind, PartKind};

    fn all() -> Checksums {
        Checksums::default()
            .with_md5([0; 16])
            .with_composite(Composite::of_parts(PartKind::Crc32, &[1, 2]))
            .with_other_crc(CrcKind::Crc64Nvme.checksum(b"x"))
            .with_crc32c(1)
    }

    /// Whatever order a backend fills them in, they come out CRC32C,
    /// other CRC, composite, MD5; a composite is no whole-object one.
    #[test]
    fn the_strongest_comes_first() {
        let names: Vec<_> = all().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["CRC32C", "CRC64NVME", "CRC32", "MD5"]);
        assert_eq!(all().strongest(), Some(Checksum::Crc32c(1)));
        let no_crcs = all().with_crc32c(None).with_other_crc(None);
        assert!(matches!(no_crcs.strongest(), Some(Checksum::Composite(_))));
        assert_eq!(
            no_crcs.whole().collect::<Vec<_>>(),
            [Checksum::Md5([0; 16])]
        );
        assert!(Checksums::default().is_empty());
        assert!(!no_crcs.is_empty());
    }

    /// A CRC32C on both sides decides, whatever else differs; an MD5 only
    /// when both have one and share no CRC; other CRCs only of one
    /// algorithm; none in common cannot say.
    #[test]
    fn the_strongest_common_checksum_decides() {
        let crc = |c: u32| Checksums::default().with_crc32c(c);
        let md5 = |b: u8| Checksums::default().with_md5([b; 16]);
        assert_eq!(
            crc(1)
                .with_md5([1; 16])
                .same_content(&crc(1).with_md5([2; 16])),
            Some(true)
        );
        assert_eq!(crc(1).same_content(&crc(2)), Some(false));
        assert_eq!(crc(1).with_md5([1; 16]).same_content(&md5(1)), Some(true));
        assert_eq!(md5(1).same_content(&md5(2)), Some(false));
        assert_eq!(crc(1).same_content(&md5(1)), None);
        let crc32 = Checksums::default().with_other_crc(CrcKind::Crc32.checksum(b"a"));
        let crc64 = Checksums::default().with_other_crc(CrcKind::Crc64Nvme.checksum(b"a"));
        assert_eq!(crc32.same_content(&crc32), Some(true));
        assert_eq!(crc32.same_content(&crc64), None);
        assert_eq!(
            crc32.common(&crc32),
            Some(Ok(Checksum::Other(CrcKind::Crc32.checksum(b"a"))))
        );
        assert_eq!(Checksums::default().same_content(&crc(1)), None);
    }

    /// Equal composites mean equal bytes; different ones may be the same
    /// bytes cut into other parts, and a composite says nothing against a
    /// whole-object CRC.
    #[test]
    fn composites_agree_only_when_equal() {
        let c = |crcs: &[u32]| {
            Checksums::default().with_composite(Composite::of_parts(PartKind::Crc32, crcs))
        };
        assert_eq!(c(&[1, 2]).same_content(&c(&[1, 2])), Some(true));
        assert_eq!(c(&[1, 2]).same_content(&c(&[3])), None);
        assert_eq!(
            c(&[1, 2]).common(&c(&[1, 2])),
            None,
            "not a whole-object one"
        );
        let whole = Checksums::default().with_other_crc(CrcKind::Crc32.checksum(b"a"));
        assert_eq!(c(&[1, 2]).same_content(&whole), None);
    }

    /// Every mismatch reads the same: the algorithm, the store's value,
    /// the bytes'; the sides and the part named when the caller says.
    #[test]
    fn a_mismatch_has_one_wording() {
        let m = Checksums::default()
            .with_crc32c(1)
            .common(&Checksums::default().with_crc32c(2));
        let m = m.unwrap().unwrap_err();
        assert_eq!(
            m.to_string(),
            "CRC32C mismatch: the store says 00000001, the bytes received give 00000002"
        );
        let sent = m.clone().sides("the store computed", "the bytes sent give");
        assert_eq!(
            sent.to_string(),
            "CRC32C mismatch: the store computed 00000001, the bytes sent give 00000002"
        );
        let md5 = Mismatch::new(Checksum::Md5([0; 16]), Checksum::Md5([255; 16]));
        assert_eq!(
            md5.to_string(),
            format!(
                "MD5 mismatch: the store says {}, the bytes received give {}",
                "0".repeat(32),
                "f".repeat(32)
            )
        );
        let other = Checksum::Other(OtherCrc::Crc32(0xd5b2_57cc));
        assert_eq!(
            Mismatch::new(other, other).to_string(),
            "CRC32 mismatch: the store says 1bJXzA== (d5b257cc), the bytes received give 1bJXzA== (d5b257cc)"
        );
        let part = Mismatch::of_part("CRC32", "part 2 of 3".into(), 1, 0xabc);
        assert_eq!(
            part.to_string(),
            "CRC32 mismatch in part 2 of 3: the store says 00000001, the bytes received give 00000abc"
        );
    }
}
