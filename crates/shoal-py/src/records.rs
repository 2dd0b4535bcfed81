//! `Records`: a listing partition kept as columns, not as Python objects.
//!
//! A Dask listing partition (`shoal.dask.list_partitions`, an inventory
//! report's data file) reads as a list of dicts (`url`, `key`, `size`,
//! `updated`), the shape Dask bags and users expect. Built as real dicts
//! it cost a worker about 600 bytes and 2 CPU µs a key over what the CLI
//! spends listing it (bench/results/DASK-LISTING.md): 6 GiB for 10 million
//! keys. Here the keys sit in one string with their ends beside them and
//! the sizes and times in plain vectors (about 30 bytes a key beside the
//! key itself), the whole built without the GIL; a dict is made only when
//! Python asks for one item. What the Dask tasks need from a partition
//! (its URLs, its byte cuts, its total size, its columns for a
//! DataFrame) is answered from the columns without making any.
//!
//! It pickles as its columns (Dask moves partitions between workers) and
//! reports its real size to `sys.getsizeof`, which Dask's memory
//! accounting reads.

use pyo3::IntoPyObjectExt;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySlice};

/// Columns of a listing, in the order listed; `updated` is seconds since
/// the epoch, NaN where the store did not say.
#[pyclass(frozen, module = "shoal._shoal", sequence)]
#[derive(Default, Clone)]
pub(crate) struct Records {
    /// What every URL starts with: `s3://bucket/`.
    base: String,
    keys: String,
    /// `keys[ends[i-1]..ends[i]]` is key `i`.
    ends: Vec<usize>,
    sizes: Vec<u64>,
    updated: Vec<f64>,
}

/// Equal columns, an unknown time (NaN) equal to another.
impl PartialEq for Records {
    fn eq(&self, o: &Self) -> bool {
        let same_times = self.updated.len() == o.updated.len()
            && self
                .updated
                .iter()
                .zip(&o.updated)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        self.base == o.base
            && self.keys == o.keys
            && self.ends == o.ends
            && self.sizes == o.sizes
            && same_times
    }
}

impl Records {
    /// An empty partition of the bucket whose URLs start with `base`.
    pub(crate) fn new(base: String) -> Self {
        Records {
            base,
            ..Records::default()
        }
    }

    pub(crate) fn push(&mut self, key: &str, size: u64, updated_ns: Option<i128>) {
        self.keys.push_str(key);
        self.ends.push(self.keys.len());
        self.sizes.push(size);
        self.updated
            .push(updated_ns.map_or(f64::NAN, |ns| ns as f64 / 1e9));
    }

    /// Gives back what the columns grew into and do not use (they grow by
    /// doubling: a partition of 145,000 keys held 34 MB where 20 would do),
    /// so the memory Dask counts for a partition is what it holds.
    pub(crate) fn shrink(&mut self) {
        self.keys.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.sizes.shrink_to_fit();
        self.updated.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Where key `i` starts in `keys` (`len()` for the end of the last).
    fn key_start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] }
    }

    fn key_at(&self, i: usize) -> &str {
        &self.keys[self.key_start(i)..self.ends[i]]
    }

    fn url_at(&self, i: usize) -> String {
        let key = self.key_at(i);
        let mut u = String::with_capacity(self.base.len() + key.len());
        u.push_str(&self.base);
        u.push_str(key);
        u
    }

    fn updated_at(&self, i: usize) -> Option<f64> {
        Some(self.updated[i]).filter(|t| !t.is_nan())
    }

    fn index(&self, i: isize) -> PyResult<usize> {
        let n = self.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if (0..n).contains(&j) {
            Ok(j as usize)
        } else {
            Err(pyo3::exceptions::PyIndexError::new_err(
                "Records index out of range",
            ))
        }
    }

    fn record<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "url"), self.url_at(i))?;
        d.set_item(intern!(py, "key"), self.key_at(i))?;
        d.set_item(intern!(py, "size"), self.sizes[i])?;
        d.set_item(intern!(py, "updated"), self.updated_at(i))?;
        Ok(d)
    }

    fn records<'py>(
        &self,
        py: Python<'py>,
        idx: impl Iterator<Item = usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for i in idx {
            list.append(self.record(py, i)?)?;
        }
        Ok(list)
    }

    fn bytes_of<T: Copy>(v: &[T], to: fn(T) -> [u8; 8]) -> Vec<u8> {
        v.iter().flat_map(|x| to(*x)).collect()
    }

    fn from_bytes<T>(b: &[u8], from: fn([u8; 8]) -> T) -> PyResult<Vec<T>> {
        if !b.len().is_multiple_of(8) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "Records: a column's bytes are not whole 8-byte values",
            ));
        }
        Ok(b.chunks_exact(8)
            .map(|c| from(c.try_into().expect("8 bytes")))
            .collect())
    }
}

/// `(base, keys, ends, sizes, updated)`, the columns as pickled.
type Wire<'a> = (String, String, &'a [u8], &'a [u8], &'a [u8]);

#[pymethods]
impl Records {
    /// Rebuilds a pickled partition, checking that its columns agree.
    #[staticmethod]
    fn _restore(w: Wire<'_>) -> PyResult<Self> {
        let (base, keys, ends, sizes, updated) = w;
        let r = Records {
            base,
            ends: Self::from_bytes(ends, |b| u64::from_le_bytes(b) as usize)?,
            sizes: Self::from_bytes(sizes, u64::from_le_bytes)?,
            updated: Self::from_bytes(updated, f64::from_le_bytes)?,
            keys,
        };
        let n = r.ends.len();
        let ordered = r.ends.windows(2).all(|w| w[0] <= w[1]);
        let fits = r.ends.last().is_none_or(|&e| e == r.keys.len());
        let on_chars = r.ends.iter().all(|&e| r.keys.is_char_boundary(e));
        if r.sizes.len() != n || r.updated.len() != n || !ordered || !fits || !on_chars {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "Records: the pickled columns do not agree with each other",
            ));
        }
        Ok(r)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let restore = py.get_type::<Records>().getattr("_restore")?;
        let wire = (
            &self.base,
            &self.keys,
            PyBytes::new(
                py,
                &Self::bytes_of(&self.ends, |e| (e as u64).to_le_bytes()),
            ),
            PyBytes::new(py, &Self::bytes_of(&self.sizes, u64::to_le_bytes)),
            PyBytes::new(py, &Self::bytes_of(&self.updated, f64::to_le_bytes)),
        );
        Ok((restore, (wire,).into_bound_py_any(py)?))
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    /// One record as a dict, or a slice of them as a list of dicts.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        i: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(s) = i.cast::<PySlice>() {
            let ix = s.indices(self.len() as isize)?;
            let idx = (0..ix.slicelength).map(|k| (ix.start + k as isize * ix.step) as usize);
            return Ok(self.records(py, idx)?.into_any());
        }
        let j = self.index(i.extract()?)?;
        Ok(self.record(py, j)?.into_any())
    }

    fn __iter__(slf: Bound<'_, Self>) -> RecordsIter {
        RecordsIter {
            records: slf.unbind(),
            next: 0,
        }
    }

    /// Equal to another `Records` with the same columns, or to any
    /// sequence of the same dicts (a partition compared with a list).
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(o) = other.cast::<Records>() {
            return Ok(self == o.get());
        }
        if other.len().ok() != Some(self.len()) {
            return Ok(false);
        }
        self.records(py, 0..self.len())?.eq(other
            .call_method0(intern!(py, "__iter__"))?
            .try_iter()?
            .collect::<PyResult<Vec<_>>>()?)
    }

    fn __repr__(&self) -> String {
        format!("Records({} objects under {:?})", self.len(), self.base)
    }

    /// The columns' memory, for Dask's accounting.
    fn __sizeof__(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.base.capacity()
            + self.keys.capacity()
            + self.ends.capacity() * 8
            + self.sizes.capacity() * 8
            + self.updated.capacity() * 8
    }

    /// Key `i` (negative counts from the end).
    fn key(&self, i: isize) -> PyResult<&str> {
        Ok(self.key_at(self.index(i)?))
    }

    fn keys(&self) -> Vec<&str> {
        (0..self.len()).map(|i| self.key_at(i)).collect()
    }

    fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url_at(i)).collect()
    }

    fn sizes(&self) -> Vec<u64> {
        self.sizes.clone()
    }

    /// Times of last update (seconds; NaN where unknown, as in a
    /// DataFrame's float column).
    fn updated(&self) -> Vec<f64> {
        self.updated.clone()
    }

    fn total_size(&self) -> u64 {
        self.sizes.iter().sum()
    }

    /// Records `lo..hi` as a partition of their own (bounds clamped to the
    /// partition, as a slice's): a listing task that listed several
    /// partitions' keys hands each its share without making any dict.
    fn part(&self, lo: usize, hi: usize) -> Records {
        let hi = hi.min(self.len());
        let lo = lo.min(hi);
        let (from, to) = (self.key_start(lo), self.key_start(hi));
        Records {
            base: self.base.clone(),
            keys: self.keys[from..to].to_owned(),
            ends: self.ends[lo..hi].iter().map(|e| e - from).collect(),
            sizes: self.sizes[lo..hi].to_vec(),
            updated: self.updated[lo..hi].to_vec(),
        }
    }

    /// The URLs whose keys lie in `[lo, hi)` (None: unbounded) and whose
    /// size is at most `max_size`.
    #[pyo3(signature = (lo=None, hi=None, *, max_size=None))]
    fn urls_between(
        &self,
        lo: Option<&str>,
        hi: Option<&str>,
        max_size: Option<u64>,
    ) -> Vec<String> {
        (0..self.len())
            .filter(|&i| {
                let k = self.key_at(i);
                lo.is_none_or(|lo| k >= lo)
                    && hi.is_none_or(|hi| k < hi)
                    && max_size.is_none_or(|m| self.sizes[i] <= m)
            })
            .map(|i| self.url_at(i))
            .collect()
    }

    /// Keys where the partition is cut so that each piece holds at most
    /// `bytes_per_piece` bytes and `keys_per_piece` keys (a piece is one
    /// copy or sync task; a single object bigger than the budget is a
    /// piece alone), and the objects bigger than `bytes_per_piece` as
    /// `(url, size)`, to be split by byte range.
    #[pyo3(signature = (bytes_per_piece, *, keys_per_piece=None))]
    fn byte_cuts(
        &self,
        bytes_per_piece: u64,
        keys_per_piece: Option<usize>,
    ) -> (Vec<&str>, Vec<(String, u64)>) {
        let (cuts, _) = self.cut(bytes_per_piece, keys_per_piece);
        let big = (0..self.len())
            .filter(|&i| self.sizes[i] > bytes_per_piece)
            .map(|i| (self.url_at(i), self.sizes[i]))
            .collect();
        (cuts, big)
    }

    /// Pieces to be joined into tasks once the plan's total is known
    /// (`shoal_transfer::ops::task_size`): the keys where pieces start as
    /// [`Self::byte_cuts`] cuts them, by `bytes_per_piece` or else by the
    /// grain for `slots` task slots; each piece's `(bytes, keys)`; and the
    /// largest object's size (whether any could need a split copy).
    #[pyo3(signature = (slots, *, bytes_per_piece=None, keys_per_piece=None))]
    fn byte_pieces(
        &self,
        slots: usize,
        bytes_per_piece: Option<u64>,
        keys_per_piece: Option<usize>,
    ) -> (Vec<&str>, Vec<(u64, u64)>, u64) {
        let budget = bytes_per_piece
            .unwrap_or_else(|| shoal_transfer::ops::task_size::grain(self.total_size(), slots));
        let (cuts, pieces) = self.cut(budget, keys_per_piece);
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        (cuts, pieces, largest)
    }
}

impl Records {
    /// The cuts of [`Records::byte_cuts`] and each piece's bytes and keys.
    fn cut(&self, budget: u64, keys_per_piece: Option<usize>) -> (Vec<&str>, Vec<(u64, u64)>) {
        let (mut cuts, mut pieces) = (Vec::new(), Vec::new());
        let (mut used, mut n) = (0u64, 0usize);
        for i in 0..self.len() {
            let size = self.sizes[i];
            let full = used.saturating_add(size) > budget || keys_per_piece.is_some_and(|k| n >= k);
            if n > 0 && full {
                cuts.push(self.key_at(i));
                pieces.push((used, n as u64));
                (used, n) = (0, 0);
            }
            used = used.saturating_add(size);
            n += 1;
        }
        if n > 0 {
            pieces.push((used, n as u64));
        }
        (cuts, pieces)
    }
}

/// Iterates a [`Records`] as dicts.
#[pyclass(module = "shoal._shoal")]
pub(crate) struct RecordsIter {
    records: Py<Records>,
    next: usize,
}

#[pymethods]
impl RecordsIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let r = self.records.get();
        if self.next >= r.len() {
            return Ok(None);
        }
        self.next += 1;
        r.record(py, self.next - 1).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Records {
        let mut r = Records::new("s3://b/".into());
        for (k, n) in [("a", 5), ("b/é", 0), ("c", 20), ("d", 3), ("e", 4)] {
            r.push(k, n, (n > 0).then_some(n as i128 * 1_000_000_000));
        }
        r
    }

    #[test]
    fn columns_read_back_per_item() {
        let r = sample();
        assert_eq!(r.len(), 5);
        assert_eq!(r.key_at(1), "b/é");
        assert_eq!(r.url_at(4), "s3://b/e");
        assert_eq!(r.updated_at(0), Some(5.0));
        assert_eq!(r.updated_at(1), None);
        assert_eq!(r.index(-1).unwrap(), 4);
        assert!(r.index(5).is_err() && r.index(-6).is_err());
    }

    #[test]
    fn parts_are_the_records_between_their_bounds() {
        let r = sample();
        let joined: Vec<Records> = [(0, 2), (2, 3), (3, 9)].map(|(a, b)| r.part(a, b)).into();
        assert_eq!(
            joined.iter().map(Records::len).collect::<Vec<_>>(),
            [2, 1, 2]
        );
        assert_eq!(joined[0].key_at(1), "b/é");
        assert_eq!(joined[1].key_at(0), "c");
        assert_eq!(joined[1].url_at(0), "s3://b/c");
        assert_eq!((joined[2].key_at(0), joined[2].key_at(1)), ("d", "e"));
        assert_eq!(joined[2].sizes, [3, 4]);
        assert!(joined[0].updated_at(1).is_none() && joined[2].updated_at(1) == Some(4.0));
        // The parts hold every record once, in order.
        let mut all = Records::new("s3://b/".into());
        for p in &joined {
            for i in 0..p.len() {
                let ns = p.updated_at(i).map(|t| (t * 1e9) as i128);
                all.push(p.key_at(i), p.sizes[i], ns);
            }
        }
        assert!(all == r);
        assert_eq!(r.part(4, 2).len(), 0);
        assert_eq!(r.part(7, 9).len(), 0);
        assert!(r.part(0, 5) == r);
    }

    #[test]
    fn cuts_bound_bytes_and_keys_and_name_big_objects() {
        let r = sample();
        // 10 bytes a piece: [a b] [c] [d e]; c alone and too big.
        let (cuts, big) = r.byte_cuts(10, None);
        assert_eq!(cuts, ["c", "d"]);
        assert_eq!(big, [("s3://b/c".to_owned(), 20)]);
        // Two keys a piece as well.
        let (cuts, _) = r.byte_cuts(100, Some(2));
        assert_eq!(cuts, ["c", "e"]);
        // The same cuts with each piece's bytes and keys, and the largest.
        let (cuts, pieces, largest) = r.byte_pieces(1, Some(10), None);
        assert_eq!(cuts, ["c", "d"]);
        assert_eq!(pieces, [(5, 2), (20, 1), (7, 2)]);
        assert_eq!(largest, 20);
        // Without a budget, the grain: 32 bytes fit one piece.
        let (cuts, pieces, _) = r.byte_pieces(4, None, None);
        assert!(cuts.is_empty());
        assert_eq!(pieces, [(32, 5)]);
        assert_eq!(
            r.urls_between(Some("b"), Some("e"), Some(10)),
            ["s3://b/b/é", "s3://b/d"]
        );
    }

    #[test]
    fn pickled_columns_come_back_equal_and_bad_ones_are_refused() {
        let r = sample();
        let ends = Records::bytes_of(&r.ends, |e| (e as u64).to_le_bytes());
        let sizes = Records::bytes_of(&r.sizes, u64::to_le_bytes);
        let upd = Records::bytes_of(&r.updated, f64::to_le_bytes);
        let back =
            Records::_restore((r.base.clone(), r.keys.clone(), &ends, &sizes, &upd)).unwrap();
        assert!(back.updated[1].is_nan());
        assert!(back == r, "equal, unknown times included");
        // An end inside "é", a column short, an end short of the keys, a
        // column not whole values.
        let mut inside = r.ends.clone();
        inside[1] -= 1;
        let inside = Records::bytes_of(&inside, |e| (e as u64).to_le_bytes());
        let longer = format!("{}x", r.keys);
        let bad: [(&str, &[u8], &[u8]); 4] = [
            (&r.keys, &inside, &sizes),
            (&r.keys, &ends, &sizes[8..]),
            (&longer, &ends, &sizes),
            (&r.keys, &ends[..7], &sizes),
        ];
        for (keys, e, s) in bad {
            assert!(Records::_restore((r.base.clone(), keys.to_owned(), e, s, &upd)).is_err());
        }
    }
}
