//! Checking an S3 object whose only checksum is COMPOSITE (`xxxx-N`).
//!
//! boto3 and the AWS CLI leave one on every multipart upload: the CRC32 of
//! the parts' CRC32s. With the part boundaries (one GetObjectAttributes
//! request, none for a one-part object) each slice of a download cuts its
//! CRC at the boundaries inside it, the pieces combine into each part's
//! CRC, and those compose into the value to compare, so such objects are
//! checked as the bytes arrive, like those with a whole-object CRC, instead
//! of by their length only. The store's own part CRCs, when it gives them,
//! name the part that differs.

use std::sync::Arc;

use shoal_core::checksum::{
    Checksum, Checksums, Composite, CrcKind, Mismatch, PartKind, PartPiece, PartSums, part_crcs,
};
use shoal_core::{Location, ObjectMeta, Op, Result, Store, StoredPart};

use super::{Verified, mismatch};
use crate::rate::Rates;

/// What checking one object's composite checksum needs.
#[derive(Debug, Clone)]
pub(crate) struct PartCheck {
    composite: Composite,
    parts: Vec<StoredPart>,
    /// Where each part ends, for [`PartSums`].
    ends: Arc<[u64]>,
}

impl PartCheck {
    /// For an object whose only checksum is composite: its parts (asked
    /// of the store when there are several). None when there is nothing
    /// to check this way, or the store cannot say where the parts are
    /// (the object is then checked by length, as before).
    /// The part list is a request like any other: `rates` paces it.
    pub(crate) async fn learn(
        store: &Arc<dyn Store>,
        src: &Location,
        meta: &ObjectMeta,
        op: Op,
        rates: &Rates,
    ) -> Result<Option<PartCheck>> {
        let Some(Checksum::Composite(composite)) = meta.checksums.strongest() else {
            return Ok(None);
        };
        let parts = if composite.parts == 1 {
            vec![StoredPart {
                size: meta.size,
                crc: None,
            }]
        } else {
            rates.request().await;
            // A store without multipart uploads cannot say either.
            let listed = match store.multipart() {
                Some(m) => (m.parts(&src.bucket, &src.key, meta.version.as_ref()))
                    .await
                    .map_err(|e| e.with_url(src.to_string()).with_op(op))?,
                None => None,
            };
            let Some(parts) = listed else {
                return Ok(None);
            };
            parts
        };
        let total: u64 = parts.iter().map(|p| p.size).sum();
        if parts.len() != composite.parts as usize || total != meta.size {
            tracing::debug!(
                url = %src,
                parts = parts.len(),
                total,
                "the part list does not match the object; checked by length"
            );
            return Ok(None);
        }
        let ends: Arc<[u64]> = parts
            .iter()
            .scan(0u64, |end, p| {
                *end += p.size;
                Some(*end)
            })
            .collect();
        Ok(Some(PartCheck {
            composite,
            parts,
            ends,
        }))
    }

    /// A server-side copy (`copied`) of an object whose only checksum is
    /// composite, against the whole-object CRC the copy was asked to keep:
    /// the parts' CRCs must compose into the source's and combine into
    /// the copy's. `Err` says how the copy differs; size only when either
    /// side cannot say (the part list is asked for only when the copy has
    /// a CRC to compare).
    pub(crate) async fn check_copy(
        store: &Arc<dyn Store>,
        src: &Location,
        meta: &ObjectMeta,
        copied: &Checksums,
        rates: &Rates,
    ) -> Result<std::result::Result<Verified, String>> {
        let Some(composite) = meta.checksums.composite() else {
            return Ok(Ok(Verified::SizeOnly));
        };
        let whole = match composite.kind {
            PartKind::Crc32c => copied.crc32c(),
            PartKind::Crc32 => (copied.other_crc())
                .filter(|c| c.kind() == CrcKind::Crc32)
                .map(|c| c.value() as u32),
        };
        let Some(whole) = whole else {
            return Ok(Ok(Verified::SizeOnly));
        };
        let Some(check) = PartCheck::learn(store, src, meta, Op::Copy, rates).await? else {
            return Ok(Ok(Verified::SizeOnly));
        };
        Ok(match check.matches_whole(whole) {
            Some(true) => Ok(Verified::Parts(composite.kind)),
            None => Ok(Verified::SizeOnly),
            Some(false) => Err(format!(
                "has a {} that does not match the source's parts ({composite})",
                composite.kind.name()
            )),
        })
    }

    /// The algorithm of the parts' CRCs.
    pub(crate) fn kind(&self) -> PartKind {
        self.composite.kind
    }

    /// Per-part CRCs of bytes from offset `start`.
    pub(crate) fn sums(&self, start: u64) -> PartSums {
        PartSums::new(self.composite.kind, self.ends.clone(), start)
    }

    /// Whether `whole`, a whole-object CRC in the parts' algorithm, is
    /// that of the bytes the composite checksum describes (what a
    /// server-side copy of such an object answers). One part is its own
    /// whole; several need each part's CRC from the store, which must
    /// compose into the composite and combine into `whole`. None when the
    /// store did not give them.
    pub(crate) fn matches_whole(&self, whole: u32) -> Option<bool> {
        let kind = self.composite.kind;
        if self.parts.len() == 1 {
            return Some(Composite::of_parts(kind, &[whole]) == self.composite);
        }
        let crcs: Option<Vec<u32>> = self.parts.iter().map(|p| p.crc).collect();
        let crcs = crcs?;
        let mut combined = None;
        for (crc, part) in crcs.iter().zip(&self.parts) {
            combined = Some(match combined {
                None => *crc,
                Some(acc) => kind.combine(acc, *crc, part.size),
            });
        }
        Some(
            Composite::of_parts(kind, &crcs) == self.composite
                && combined.unwrap_or_else(|| kind.checksum(&[])) == whole,
        )
    }

    /// Compares the part CRCs of `pieces` (in offset order, covering the
    /// object) with the store's; `tail` ends the message (what became of
    /// the bytes).
    pub(crate) fn check(
        &self,
        pieces: &[PartPiece],
        op: Op,
        url: &str,
        tail: &str,
    ) -> Result<Verified> {
        let kind = self.composite.kind;
        let name = kind.name();
        let got = part_crcs(kind, pieces);
        let mismatch = |msg: String| mismatch(op, url, msg, tail);
        let n = self.parts.len();
        // Pieces past the last part (more bytes than the parts hold).
        if let Some(&(_, _, len)) = got.iter().find(|&&(at, _, _)| at >= n) {
            return Err(mismatch(format!(
                "{len} bytes received past the last of {n} parts"
            )));
        }
        let mut crcs = Vec::with_capacity(n);
        let mut start = 0u64;
        for (i, part) in self.parts.iter().enumerate() {
            let end = start + part.size;
            let span = format!("part {} of {n} (bytes {start}-{})", i + 1, end.max(1) - 1);
            // An empty part has no piece: its CRC is that of nothing.
            let (crc, len) = match got.iter().find(|&&(at, _, _)| at == i) {
                Some(&(_, crc, len)) => (crc, len),
                None => (kind.checksum(&[]), 0),
            };
            if len != part.size {
                return Err(mismatch(format!(
                    "{span}: received {len} bytes, expected {}",
                    part.size
                )));
            }
            if let Some(want) = part.crc
                && want != crc
            {
                return Err(mismatch(
                    Mismatch::of_part(name, span, want, crc).to_string(),
                ));
            }
            crcs.push(crc);
            start = end;
        }
        let ours = Composite::of_parts(kind, &crcs);
        if ours != self.composite {
            let m = Mismatch::new(
                Checksum::Composite(self.composite),
                Checksum::Composite(ours),
            );
            let m = m.sides(
                "the store's composite checksum is",
                "the bytes received give",
            );
            return Err(mismatch(m.to_string()));
        }
        Ok(Verified::Parts(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::ErrorKind;

    fn check_for(data: &[u8], sizes: &[u64], with_crcs: bool) -> PartCheck {
        let kind = PartKind::Crc32;
        let mut at = 0usize;
        let parts: Vec<StoredPart> = sizes
            .iter()
            .map(|&s| {
                let p = &data[at..at + s as usize];
                at += s as usize;
                StoredPart {
                    size: s,
                    crc: with_crcs.then(|| kind.checksum(p)),
                }
            })
            .collect();
        let crcs: Vec<u32> = (parts.iter().scan(0usize, |a, p| {
            let s = &data[*a..*a + p.size as usize];
            *a += p.size as usize;
            Some(kind.checksum(s))
        }))
        .collect();
        let ends: Arc<[u64]> = (sizes.iter().scan(0, |e, s| {
            *e += s;
            Some(*e)
        }))
        .collect();
        PartCheck {
            composite: Composite::of_parts(kind, &crcs),
            parts,
            ends,
        }
    }

    #[test]
    fn a_whole_crc_matches_the_composite_it_was_made_of() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = PartKind::Crc32.checksum(&data);
        let other = PartKind::Crc32.checksum(&data[1..]);
        // One part: its own whole, no part CRCs needed.
        let one = check_for(&data, &[10_000], false);
        assert_eq!(one.matches_whole(whole), Some(true));
        assert_eq!(one.matches_whole(other), Some(false));
        // Several: only with the store's part CRCs.
        let three = check_for(&data, &[4_000, 4_000, 2_000], true);
        assert_eq!(three.matches_whole(whole), Some(true));
        assert_eq!(three.matches_whole(other), Some(false));
        let unknown = check_for(&data, &[4_000, 4_000, 2_000], false);
        assert_eq!(unknown.matches_whole(whole), None);
    }

    fn pieces(c: &PartCheck, data: &[u8], cuts: &[usize]) -> Vec<PartPiece> {
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            let mut s = c.sums(w[0] as u64);
            s.update(&data[w[0]..w[1]]);
            out.extend(s.finish());
        }
        out
    }

    /// Right bytes pass in any slicing; a flipped byte fails naming its
    /// part when the store gave part CRCs, and the composite otherwise.
    #[test]
    fn parts_are_checked_and_a_bad_one_is_named() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 13 % 251) as u8).collect();
        for with_crcs in [true, false] {
            let c = check_for(&data, &[20_000, 20_000, 10_000], with_crcs);
            for cuts in [&[0, 50_000][..], &[0, 7, 20_000, 33_333, 50_000]] {
                let v = c.check(&pieces(&c, &data, cuts), Op::Download, "s3://b/k", "");
                assert_eq!(v.unwrap(), Verified::Parts(PartKind::Crc32));
            }
            let mut bad = data.clone();
            bad[25_000] ^= 1;
            let e = c
                .check(
                    &pieces(&c, &bad, &[0, 30_000, 50_000]),
                    Op::Download,
                    "s3://b/k",
                    "; nothing was written",
                )
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Integrity);
            let msg = e.to_string();
            if with_crcs {
                assert!(
                    msg.contains("CRC32 mismatch in part 2 of 3 (bytes 20000-39999)"),
                    "{msg}"
                );
            } else {
                assert!(msg.contains("composite checksum is"), "{msg}");
            }
            assert!(msg.contains("nothing was written"), "{msg}");
        }
    }

    /// An empty last part (S3 allows one) has no piece and still checks.
    #[test]
    fn an_empty_part_checks() {
        let data = vec![3u8; 30_000];
        let c = check_for(&data, &[20_000, 10_000, 0], true);
        let v = c.check(&pieces(&c, &data, &[0, 30_000]), Op::Download, "u", "");
        assert_eq!(v.unwrap(), Verified::Parts(PartKind::Crc32));
    }

    /// Bytes missing from a part, or past the last, are refused.
    #[test]
    fn wrong_lengths_are_refused() {
        let data = vec![7u8; 30_000];
        let c = check_for(&data, &[20_000, 10_000], false);
        let short = pieces(&c, &data[..29_000], &[0, 29_000]);
        assert!(c.check(&short, Op::Download, "u", "").is_err());
        let mut long = data.clone();
        long.push(0);
        let long = pieces(&c, &long, &[0, 30_001]);
        assert!(c.check(&long, Op::Download, "u", "").is_err());
    }
}
