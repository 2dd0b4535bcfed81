//! Records kept on disk when memory would not hold them: sorted runs
//! merged back in order ([`Sorter`]), and a queue read back in the order
//! it was written ([`Tape`]). An inventory report's rows, a plan's
//! touches (the conflict check) and sync's extras all go through here.
//!
//! Each file is an unnamed temporary file (`tempfile::tempfile()`: made
//! without a name, or unlinked at once), so nothing outlives the process
//! however it ends, a killed plan included, and a run's disk space is
//! given back as soon as the merge has read it to the end.
//!
//! A record is written by its type ([`Spill`]): its fields one after the
//! other, integers as LEB128 varints, strings length-prefixed, options
//! behind a tag byte. Records are gathered into blocks of about [`BLOCK`]
//! bytes, each compressed on its own with zstd at level 1 (fast; sorted
//! keys share long prefixes, which is what zstd finds at any level) and
//! written as `raw length, packed length` (u32, little-endian) then the
//! zstd frame, which carries its own checksum. The JSON lines this
//! replaces cost ~265 bytes an inventory row before any compression.
//!
//! Why blocks and not one zstd stream per run: a merge reads every run at
//! once, and a streaming decoder holds its window (512 KiB at level 1,
//! plus its buffers) for each; a 100-million-row report sorts in 500 runs,
//! which would be ~400 MiB of decoders. Blocks need one decompression
//! context for the whole merge and one block of each run, [`BLOCK`] bytes.
//! A sort keeps at most [`MAX_RUNS`] runs, merging in stages past that, so
//! neither its open files nor its blocks grow with the input.
//!
//! Nothing here panics on a bad file: a run that ends early, a block whose
//! checksum or lengths do not hold, a record that runs past its block, or
//! fewer records than were written, is an `io::Error` (`InvalidData` or
//! `UnexpectedEof`) that the caller names as its temporary file.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::marker::PhantomData;

/// Raw bytes of records gathered before a block is compressed: small
/// enough that a merge of [`MAX_RUNS`] runs holds 8 MiB of blocks, large enough
/// that zstd finds the repeats between neighbouring records.
pub(crate) const BLOCK: usize = 64 << 10;

/// A block's raw length read back is refused above this: only a corrupt
/// file claims more (a block is [`BLOCK`] plus one record, and no record
/// spilled here is more than a few keys long).
const MAX_BLOCK: usize = 64 << 20;

/// zstd's level: the fastest, as the sort is where the time goes.
const LEVEL: i32 = 1;

/// A record that can be spilled: written as bytes and read back the same.
pub(crate) trait Spill: Sized {
    /// Appends the record's encoding to `out`.
    fn put(&self, out: &mut Vec<u8>);
    /// Reads back one record [`Spill::put`] wrote.
    fn get(r: &mut Fields<'_>) -> io::Result<Self>;
}

/// Appends `v` as a LEB128 varint.
pub(crate) fn put_u128(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as a varint.
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    put_u128(out, v.into());
}

/// Appends `v` zigzagged (small magnitudes short, either sign).
pub(crate) fn put_i128(out: &mut Vec<u8>, v: i128) {
    put_u128(out, ((v << 1) ^ (v >> 127)) as u128);
}

/// Appends `s`, length first.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends a tag byte (0 for none, 1 for some) and the value.
pub(crate) fn put_opt<T>(out: &mut Vec<u8>, v: Option<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put(out, v);
        }
    }
}

fn corrupt(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a spilled run is corrupt: {why}"),
    )
}

/// The fields of the records of one block, read in order.
pub(crate) struct Fields<'a> {
    b: &'a [u8],
}

impl Fields<'_> {
    /// One byte.
    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        let (&x, rest) = self
            .b
            .split_first()
            .ok_or_else(|| corrupt("a record runs past its block"))?;
        self.b = rest;
        Ok(x)
    }

    /// A varint [`put_u128`] wrote.
    pub(crate) fn u128(&mut self) -> io::Result<u128> {
        let mut v = 0u128;
        for shift in (0..128).step_by(7) {
            let x = self.u8()?;
            v |= u128::from(x & 0x7f) << shift;
            if x & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("a number too long"))
    }

    /// A varint [`put_u64`] wrote.
    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        u64::try_from(self.u128()?).map_err(|_| corrupt("a number out of range"))
    }

    /// A number [`put_i128`] wrote.
    pub(crate) fn i128(&mut self) -> io::Result<i128> {
        let z = self.u128()?;
        Ok((z >> 1) as i128 ^ -((z & 1) as i128))
    }

    /// A string [`put_str`] wrote.
    pub(crate) fn str(&mut self) -> io::Result<String> {
        let n = usize::try_from(self.u64()?).map_err(|_| corrupt("a length out of range"))?;
        if n > self.b.len() {
            return Err(corrupt("a string runs past its block"));
        }
        let (s, rest) = self.b.split_at(n);
        self.b = rest;
        String::from_utf8(s.to_vec()).map_err(|_| corrupt("a string not UTF-8"))
    }

    /// An option [`put_opt`] wrote, its value read by `get`.
    pub(crate) fn opt<T>(
        &mut self,
        get: impl FnOnce(&mut Self) -> io::Result<T>,
    ) -> io::Result<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => get(self).map(Some),
            _ => Err(corrupt("an option tag neither 0 nor 1")),
        }
    }
}

/// Compresses blocks: one zstd context and its buffers, reused for every
/// block of every run.
struct Packer {
    zstd: zstd::bulk::Compressor<'static>,
    raw: Vec<u8>,
    packed: Vec<u8>,
}

impl Packer {
    fn new() -> io::Result<Packer> {
        let mut zstd = zstd::bulk::Compressor::new(LEVEL)?;
        zstd.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        Ok(Packer {
            zstd,
            raw: Vec::with_capacity(BLOCK + BLOCK / 4),
            packed: Vec::new(),
        })
    }

    /// Adds a record to the block, writing the block to `f` once full.
    fn put(&mut self, t: &impl Spill, f: &mut File) -> io::Result<()> {
        t.put(&mut self.raw);
        if self.raw.len() >= BLOCK {
            self.flush(f)?;
        }
        Ok(())
    }

    /// Writes the block gathered so far, if any, to `f`.
    fn flush(&mut self, f: &mut File) -> io::Result<()> {
        if self.raw.is_empty() {
            return Ok(());
        }
        if self.raw.len() > MAX_BLOCK {
            return Err(io::Error::other("a record too large to spill"));
        }
        self.packed.clear();
        self.packed
            .reserve(zstd::zstd_safe::compress_bound(self.raw.len()));
        let n = self
            .zstd
            .compress_to_buffer(&self.raw[..], &mut self.packed)?;
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        head[4..].copy_from_slice(&(n as u32).to_le_bytes());
        f.write_all(&head)?;
        f.write_all(&self.packed)?;
        self.raw.clear();
        Ok(())
    }
}

/// Decompresses blocks: one zstd context for every run of a merge.
struct Unpacker {
    zstd: zstd::bulk::Decompressor<'static>,
    packed: Vec<u8>,
}

impl Unpacker {
    fn new() -> io::Result<Unpacker> {
        Ok(Unpacker {
            zstd: zstd::bulk::Decompressor::new()?,
            packed: Vec::new(),
        })
    }
}

/// One spilled file being read back: its current block, and how many
/// records are still to come (the count written, so a file that lost
/// whole blocks is noticed).
struct Run {
    file: File,
    block: Vec<u8>,
    at: usize,
    left: u64,
}

impl Run {
    fn new(mut file: File, records: u64) -> io::Result<Run> {
        file.rewind()?;
        Ok(Run {
            file,
            block: Vec::new(),
            at: 0,
            left: records,
        })
    }

    fn next<T: Spill>(&mut self, z: &mut Unpacker) -> io::Result<Option<T>> {
        if self.left == 0 {
            return Ok(None);
        }
        if self.at == self.block.len() {
            self.load(z)?;
        }
        let mut r = Fields {
            b: &self.block[self.at..],
        };
        let t = T::get(&mut r)?;
        self.at = self.block.len() - r.b.len();
        self.left -= 1;
        Ok(Some(t))
    }

    /// Reads and decompresses the next block.
    fn load(&mut self, z: &mut Unpacker) -> io::Result<()> {
        let early = |e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::new(io::ErrorKind::UnexpectedEof, "a spilled run ended early")
            } else {
                e
            }
        };
        let mut head = [0u8; 8];
        self.file.read_exact(&mut head).map_err(early)?;
        let raw = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let packed = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as u64;
        if raw == 0 || raw > MAX_BLOCK {
            return Err(corrupt("a block's length out of range"));
        }
        z.packed.clear();
        // `take` grows the buffer only as bytes arrive: a corrupt length
        // costs no allocation beyond the file.
        (&mut self.file).take(packed).read_to_end(&mut z.packed)?;
        if z.packed.len() as u64 != packed {
            return Err(early(io::ErrorKind::UnexpectedEof.into()));
        }
        self.block.clear();
        self.block.reserve(raw);
        let n = z
            .zstd
            .decompress_to_buffer(&z.packed[..], &mut self.block)
            .map_err(|e| corrupt(&e.to_string()))?;
        if n != raw {
            return Err(corrupt("a block's length differs from its header"));
        }
        self.at = 0;
        Ok(())
    }
}

/// The one compression context a sorter's writes share, made on its
/// first spill.
fn packer(p: &mut Option<Packer>) -> io::Result<&mut Packer> {
    Ok(match p {
        Some(z) => z,
        none => none.insert(Packer::new()?),
    })
}

/// A spilled file not yet read back, and its record count.
struct Stored {
    file: File,
    records: u64,
}

/// Writes one file of records.
fn store<'a, T: Spill + 'a>(
    z: &mut Packer,
    records: impl IntoIterator<Item = &'a T>,
) -> io::Result<Stored> {
    let mut file = tempfile::tempfile()?;
    let mut n = 0;
    for t in records {
        z.put(t, &mut file)?;
        n += 1;
    }
    z.flush(&mut file)?;
    Ok(Stored { file, records: n })
}

/// Runs a sort keeps at once, at most: each is an open file, and the
/// merge holds a block of each. Past this many, the newer half of them is
/// merged into one run (a merge in stages), so a sort of any size holds at
/// most this many files, well below the usual limit of 1,024 open files a
/// process (a report of a billion rows is 5,000 runs of 200,000), and
/// [`MAX_RUNS`] × [`BLOCK`] bytes of blocks in its final merge.
const MAX_RUNS: usize = 128;

/// An external sort: records kept in memory up to a run length, each full
/// run sorted and spilled, then every run merged back in order.
pub(crate) struct Sorter<T> {
    run_len: usize,
    run: Vec<T>,
    runs: Vec<Stored>,
    packer: Option<Packer>,
    /// Runs written from memory so far (the merged ones not counted).
    spilled: usize,
    max_runs: usize,
}

impl<T: Spill + Ord> Sorter<T> {
    /// A sorter holding at most `run_len` records in memory (at least one).
    pub(crate) fn new(run_len: usize) -> Self {
        Sorter {
            run_len: run_len.max(1),
            run: Vec::new(),
            runs: Vec::new(),
            packer: None,
            spilled: 0,
            max_runs: MAX_RUNS,
        }
    }

    /// A sorter that keeps at most `max_runs` runs (at least two).
    #[cfg(test)]
    fn with_max_runs(run_len: usize, max_runs: usize) -> Self {
        Sorter {
            max_runs: max_runs.max(2),
            ..Sorter::new(run_len)
        }
    }

    /// Runs held now, each an open file.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.runs.len()
    }

    /// Adds a record, spilling a sorted run when one is full.
    pub(crate) fn push(&mut self, t: T) -> io::Result<()> {
        self.run.push(t);
        if self.run.len() >= self.run_len {
            self.spill()?;
        }
        Ok(())
    }

    /// Runs spilled so far.
    #[cfg(test)]
    pub(crate) fn spilled(&self) -> usize {
        self.spilled
    }

    fn spill(&mut self) -> io::Result<()> {
        self.run.sort_unstable();
        let z = packer(&mut self.packer)?;
        let stored = store(z, &self.run)?;
        self.runs.push(stored);
        self.spilled += 1;
        self.run.clear();
        if self.runs.len() >= self.max_runs {
            self.combine()?;
        }
        Ok(())
    }

    /// Merges the newer half of the runs into one, in their place: every
    /// record of them is later than the older runs' and earlier than the
    /// runs to come, so equal records keep their order.
    fn combine(&mut self) -> io::Result<()> {
        let newer = self.runs.split_off(self.runs.len() / 2);
        let mut merged = merge::<T>(newer, Vec::new())?;
        let z = packer(&mut self.packer)?;
        let mut file = tempfile::tempfile()?;
        let mut records = 0;
        for t in &mut merged {
            z.put(&t?, &mut file)?;
            records += 1;
        }
        z.flush(&mut file)?;
        self.runs.push(Stored { file, records });
        Ok(())
    }

    /// Every record pushed, in order; of equal records, those of an
    /// earlier run first (the last run, kept in memory, last).
    pub(crate) fn sorted(mut self) -> io::Result<Sorted<T>> {
        self.run.sort_unstable();
        merge(self.runs, self.run)
    }
}

/// The runs, then `memory` (sorted), merged in order: of equal records,
/// those of an earlier run first.
fn merge<T: Spill + Ord>(runs: Vec<Stored>, memory: Vec<T>) -> io::Result<Sorted<T>> {
    let mut unpack = Unpacker::new()?;
    let mut sources = Vec::with_capacity(runs.len() + 1);
    for s in runs {
        sources.push(Source::Disk(Run::new(s.file, s.records)?));
    }
    sources.push(Source::Memory(memory.into_iter()));
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some(item) = s.next(&mut unpack)? {
            heap.push(Head { item, src: i });
        }
    }
    Ok(Sorted {
        heap,
        sources,
        unpack,
        failed: false,
    })
}

enum Source<T> {
    Disk(Run),
    Memory(std::vec::IntoIter<T>),
    Done,
}

impl<T: Spill> Source<T> {
    fn next(&mut self, z: &mut Unpacker) -> io::Result<Option<T>> {
        let t = match self {
            Source::Disk(r) => r.next(z)?,
            Source::Memory(m) => m.next(),
            Source::Done => None,
        };
        if t.is_none() {
            // Closing a run's file gives its disk space back.
            *self = Source::Done;
        }
        Ok(t)
    }
}

/// A run's next record in the merge; the heap is a max-heap, so the
/// order is reversed: the least record, then the earliest run, on top.
struct Head<T> {
    item: T,
    src: usize,
}

impl<T: Ord> Ord for Head<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        o.item.cmp(&self.item).then(o.src.cmp(&self.src))
    }
}

impl<T: Ord> PartialOrd for Head<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl<T: Ord> PartialEq for Head<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl<T: Ord> Eq for Head<T> {}

/// The k-way merge of a [`Sorter`]'s runs: a heap of each run's next
/// record. An error ends it.
pub(crate) struct Sorted<T> {
    heap: BinaryHeap<Head<T>>,
    sources: Vec<Source<T>>,
    unpack: Unpacker,
    failed: bool,
}

impl<T: Spill + Ord> Iterator for Sorted<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.failed {
            return None;
        }
        let mut top = self.heap.peek_mut()?;
        match self.sources[top.src].next(&mut self.unpack) {
            // The run's next record is no less than the one it replaces,
            // so it only sinks: one sift instead of a pop and a push.
            Ok(Some(t)) => Some(Ok(std::mem::replace(&mut top.item, t))),
            Ok(None) => Some(Ok(std::collections::binary_heap::PeekMut::pop(top).item)),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Records read back in the order they were written, from one unnamed
/// temporary file: a queue too long to keep in memory.
pub(crate) struct Tape<T> {
    file: File,
    records: u64,
    packer: Packer,
    _t: PhantomData<fn(T) -> T>,
}

impl<T: Spill> Tape<T> {
    /// An empty tape, its file made now.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Tape {
            file: tempfile::tempfile()?,
            records: 0,
            packer: Packer::new()?,
            _t: PhantomData,
        })
    }

    /// Appends a record.
    pub(crate) fn push(&mut self, t: &T) -> io::Result<()> {
        self.packer.put(t, &mut self.file)?;
        self.records += 1;
        Ok(())
    }

    /// Every record pushed, in order.
    pub(crate) fn replay(mut self) -> io::Result<Replay<T>> {
        self.packer.flush(&mut self.file)?;
        Ok(Replay {
            run: Run::new(self.file, self.records)?,
            unpack: Unpacker::new()?,
            failed: false,
            _t: PhantomData,
        })
    }
}

/// A [`Tape`] read back. An error ends it.
pub(crate) struct Replay<T> {
    run: Run,
    unpack: Unpacker,
    failed: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T: Spill> Iterator for Replay<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.failed {
            return None;
        }
        let r = self.run.next(&mut self.unpack).transpose();
        self.failed = matches!(r, Some(Err(_)));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of every kind of field, ordered by its key alone.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Rec {
        key: String,
        n: u64,
        t: Option<i128>,
        s: Option<String>,
    }

    impl Ord for Rec {
        fn cmp(&self, o: &Self) -> Ordering {
            self.key.cmp(&o.key)
        }
    }

    impl PartialOrd for Rec {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }

    impl Spill for Rec {
        fn put(&self, out: &mut Vec<u8>) {
            put_str(out, &self.key);
            put_u64(out, self.n);
            put_opt(out, self.t, put_i128);
            put_opt(out, self.s.as_deref(), put_str);
        }

        fn get(r: &mut Fields<'_>) -> io::Result<Self> {
            Ok(Rec {
                key: r.str()?,
                n: r.u64()?,
                t: r.opt(Fields::i128)?,
                s: r.opt(Fields::str)?,
            })
        }
    }

    /// `n` records of one key, numbered in push order.
    fn same_keys(n: u64) -> Vec<Rec> {
        (0..n)
            .map(|i| Rec {
                key: "same".into(),
                n: i,
                t: None,
                s: None,
            })
            .collect()
    }

    fn rec(i: u64) -> Rec {
        // Keys in a scrambled order, with newlines, quotes and non-ASCII.
        let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_003;
        Rec {
            key: format!("p/é\n\"{k:07}\"/\u{10FFFF}"),
            n: i * 1_000_003,
            t: [
                None,
                Some(-(i as i128) << 70),
                Some(i128::MAX),
                Some(i128::MIN),
            ][i as usize % 4],
            s: i.is_multiple_of(3).then(|| "x".repeat(i as usize % 50)),
        }
    }

    fn sort(recs: &[Rec], run_len: usize) -> (Vec<Rec>, usize) {
        let mut s = Sorter::new(run_len);
        for r in recs {
            s.push(r.clone()).unwrap();
        }
        let runs = s.spilled();
        (s.sorted().unwrap().map(Result::unwrap).collect(), runs)
    }

    /// Many runs of a few records (each an open file: 545, below the
    /// usual limit of 1,024), and runs of several blocks: every record
    /// comes back, field for field, in order.
    #[test]
    fn many_tiny_runs_come_back_sorted_and_intact() {
        let recs: Vec<Rec> = (0..6_000).map(rec).collect();
        let (back, runs) = sort(&recs, 11);
        assert_eq!(runs, 6_000 / 11);
        let mut want = recs.clone();
        want.sort();
        assert_eq!(back, want);
        let (back, runs) = sort(&recs, 2_500);
        assert_eq!(runs, 2);
        assert_eq!(back, want);
    }

    /// Records equal in order but not in content come back in the order
    /// of their runs, as the merges this replaced gave them.
    #[test]
    fn equal_keys_come_back_run_by_run() {
        let recs = same_keys(10);
        let (back, runs) = sort(&recs, 1);
        assert_eq!(runs, 10);
        assert_eq!(
            back.iter().map(|r| r.n).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
    }

    /// Past its limit of runs a sort merges the newer half into one, so
    /// it never holds more files than the limit, and still gives every
    /// record back in order, equal ones in the order they were pushed.
    #[test]
    fn a_sort_past_its_run_limit_merges_in_stages() {
        let recs: Vec<Rec> = (0..6_000).map(rec).collect();
        let mut s = Sorter::with_max_runs(11, 8);
        let mut most = 0;
        for r in &recs {
            s.push(r.clone()).unwrap();
            most = most.max(s.held());
        }
        assert_eq!(s.spilled(), 6_000 / 11);
        assert!(most <= 8, "{most} runs held at once");
        let mut want = recs.clone();
        want.sort();
        let back: Vec<Rec> = s.sorted().unwrap().map(Result::unwrap).collect();
        assert_eq!(back, want);

        let same = same_keys(50);
        let mut s = Sorter::with_max_runs(1, 3);
        for r in &same {
            s.push(r.clone()).unwrap();
            assert!(s.held() <= 3);
        }
        let back: Vec<u64> = s.sorted().unwrap().map(|r| r.unwrap().n).collect();
        assert_eq!(back, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert_eq!(sort(&[], 3), (vec![], 0));
        let t = Tape::<Rec>::new().unwrap();
        assert_eq!(t.replay().unwrap().count(), 0);
    }

    #[test]
    fn a_tape_keeps_its_order() {
        let mut t = Tape::new().unwrap();
        let recs: Vec<Rec> = (0..5_000).map(rec).collect();
        for r in &recs {
            t.push(r).unwrap();
        }
        let back: Vec<Rec> = t.replay().unwrap().map(Result::unwrap).collect();
        assert_eq!(back, recs);
    }

    /// A run of `n` records written through a tape, its file's bytes.
    fn tape_bytes(n: u64) -> (Vec<u8>, u64) {
        let mut t = Tape::new().unwrap();
        for i in 0..n {
            t.push(&rec(i)).unwrap();
        }
        t.packer.flush(&mut t.file).unwrap();
        t.file.rewind().unwrap();
        let mut b = Vec::new();
        t.file.read_to_end(&mut b).unwrap();
        (b, n)
    }

    /// `bytes` read back as a run of `records`: the records before the
    /// first error, and the error.
    fn read_back(bytes: &[u8], records: u64) -> (usize, Option<io::Error>) {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        let r = Replay::<Rec> {
            run: Run::new(f, records).unwrap(),
            unpack: Unpacker::new().unwrap(),
            failed: false,
            _t: PhantomData,
        };
        let mut ok = 0;
        for x in r {
            match x {
                Ok(_) => ok += 1,
                Err(e) => return (ok, Some(e)),
            }
        }
        (ok, None)
    }

    /// A run cut short, cut between blocks, with a byte changed, or
    /// holding fewer records than written: an error, never a panic or a
    /// silently shorter run.
    #[test]
    fn a_damaged_run_is_an_error() {
        let (b, n) = tape_bytes(3_000);
        let first = 8 + u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        assert!(first < b.len(), "several blocks");
        assert_eq!(read_back(&b, n).0, n as usize);
        // Cut anywhere.
        for cut in [0, 1, 7, 8, 9, b.len() / 3, b.len() / 2, b.len() - 1] {
            let (ok, e) = read_back(&b[..cut], n);
            let e = e.unwrap_or_else(|| panic!("cut at {cut}: no error"));
            assert!(ok < n as usize);
            assert!(e.to_string().contains("spilled run"), "{e}");
        }
        // Cut at the end of the first block.
        let (ok, e) = read_back(&b[..first], n);
        assert!(ok > 0 && ok < n as usize);
        assert_eq!(e.unwrap().kind(), io::ErrorKind::UnexpectedEof);
        // A byte changed anywhere.
        for at in [
            0,
            3,
            4,
            8,
            20,
            first / 2,
            first - 1,
            first + 12,
            b.len() - 2,
        ] {
            let mut bad = b.clone();
            bad[at] ^= 0x5a;
            let (_, e) = read_back(&bad, n);
            assert!(e.is_some(), "a byte changed at {at}: no error");
        }
        // A record that runs past its block.
        let mut f = tempfile::tempfile().unwrap();
        let mut z = Packer::new().unwrap();
        z.raw.extend_from_slice(&[5, b'a']);
        z.flush(&mut f).unwrap();
        f.rewind().unwrap();
        let mut short = Vec::new();
        f.read_to_end(&mut short).unwrap();
        let (ok, e) = read_back(&short, 1);
        assert_eq!(ok, 0);
        assert!(e.unwrap().to_string().contains("runs past its block"));
    }
}
