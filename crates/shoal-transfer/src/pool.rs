//! Buffers for reads into memory, kept and reused: a read of a few MB
//! into fresh memory pays a page fault for each 4 KiB page of it, and
//! freed memory of that size goes back to the kernel, so every read pays
//! again. Python's parquet reads (shoal-py's `cat_buffer`) take their
//! buffers here.
//!
//! Bounded: at most `max` bytes wait for reuse, each for at most
//! `keep_for`; a buffer is reused only for a read it fits with at most a
//! quarter of it spare. A pool of byte buffers by fit is a few lines over
//! a `Mutex<Vec>`; the pool crates (object-pool, lifeguard) keep values
//! of one type and size, not buffers chosen by length.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Fresh buffers are a multiple of this many bytes (so ranges a little
/// different in length share them).
const ROUND: usize = 64 << 10;

/// Buffers waiting for a read (see the module).
pub struct BufferPool {
    idle: Mutex<Idle>,
    max: usize,
    keep_for: Duration,
}

/// The buffers waiting, with when each came back.
struct Idle {
    bufs: Vec<(Vec<u8>, Instant)>,
    bytes: usize,
}

impl BufferPool {
    /// A pool keeping at most `max` idle bytes, each buffer at most
    /// `keep_for`.
    pub const fn new(max: usize, keep_for: Duration) -> Self {
        BufferPool {
            idle: Mutex::new(Idle {
                bufs: Vec::new(),
                bytes: 0,
            }),
            max,
            keep_for,
        }
    }

    /// A buffer for a read of `len` bytes: a kept one it fits, else a new
    /// one (zeroed by the allocator; a kept one holds an earlier read's
    /// bytes, which the read overwrites).
    pub fn take(&'static self, len: usize) -> Pooled {
        let kept = self.take_at(len, Instant::now());
        let buf = kept.unwrap_or_else(|| vec![0u8; len.div_ceil(ROUND).max(1) * ROUND]);
        Pooled {
            pool: self,
            buf,
            len,
        }
    }

    /// Keeps `buf` for a later read (or drops it, past the bounds).
    pub fn give(&self, buf: Vec<u8>) {
        self.give_at(buf, Instant::now());
    }

    /// Bytes waiting for a read.
    pub fn idle_bytes(&self) -> usize {
        self.idle.lock().expect("pool lock").bytes
    }

    /// The smallest kept buffer `len` fits in with at most a quarter spare.
    fn take_at(&self, len: usize, now: Instant) -> Option<Vec<u8>> {
        let mut idle = self.idle.lock().expect("pool lock");
        idle.expire(now, self.keep_for);
        let fits = |cap: usize| cap >= len && cap - len <= cap / 4;
        let (i, _) = (idle.bufs.iter().enumerate())
            .filter(|(_, (b, _))| fits(b.len()))
            .min_by_key(|(_, (b, _))| b.len())?;
        let (b, _) = idle.bufs.swap_remove(i);
        idle.bytes -= b.len();
        Some(b)
    }

    fn give_at(&self, buf: Vec<u8>, now: Instant) {
        if buf.is_empty() || buf.len() > self.max {
            return;
        }
        let mut idle = self.idle.lock().expect("pool lock");
        idle.expire(now, self.keep_for);
        idle.bytes += buf.len();
        idle.bufs.push((buf, now));
        while idle.bytes > self.max {
            // The oldest goes first.
            let (i, _) = (idle.bufs.iter().enumerate())
                .min_by_key(|(_, (_, t))| *t)
                .expect("over the bound, so not empty");
            let (b, _) = idle.bufs.swap_remove(i);
            idle.bytes -= b.len();
        }
    }
}

impl Idle {
    fn expire(&mut self, now: Instant, keep_for: Duration) {
        let before = self.bufs.len();
        self.bufs.retain(|(_, t)| now.duration_since(*t) < keep_for);
        if self.bufs.len() != before {
            self.bytes = self.bufs.iter().map(|(b, _)| b.len()).sum();
        }
    }
}

/// A buffer out of a [`BufferPool`] for one read: its first `len` bytes
/// are the read's. Back to the pool when dropped (a failed read), or
/// taken out whole by [`Pooled::into_parts`].
pub struct Pooled {
    pool: &'static BufferPool,
    buf: Vec<u8>,
    len: usize,
}

impl Pooled {
    /// The whole buffer and the read's length in it; the caller gives the
    /// buffer back to the pool (`BufferPool::give`) when done with it.
    pub fn into_parts(mut self) -> (Vec<u8>, usize) {
        (std::mem::take(&mut self.buf), self.len)
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl AsMut<[u8]> for Pooled {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max: usize) -> &'static BufferPool {
        Box::leak(Box::new(BufferPool::new(max, Duration::from_secs(5))))
    }

    #[test]
    fn a_buffer_is_reused_for_a_read_it_fits_without_much_waste() {
        let (p, now) = (pool(1 << 20), Instant::now());
        p.give_at(vec![1; 100], now);
        p.give_at(vec![2; 1000], now);
        assert_eq!(p.take_at(2000, now), None, "too small");
        assert_eq!(p.take_at(500, now), None, "1000 for 500 wastes half");
        assert_eq!(p.take_at(80, now).map(|b| b.len()), Some(100));
        assert_eq!(p.take_at(800, now).map(|b| b.len()), Some(1000));
        assert_eq!(p.idle_bytes(), 0);
    }

    #[test]
    fn idle_bytes_stay_bounded_and_old_buffers_go() {
        let (max, now) = (3000, Instant::now());
        let p = pool(max);
        for i in 0..4u8 {
            p.give_at(vec![i; 1001], now + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(p.idle_bytes(), 2002);
        // The two newest stayed.
        let mut kept = [p.take_at(1001, now), p.take_at(1001, now)].map(|b| b.map(|b| b[0]));
        kept.sort();
        assert_eq!(kept, [Some(2), Some(3)]);
        p.give_at(vec![9; max + 1], now);
        assert_eq!(p.idle_bytes(), 0, "bigger than the bound: not kept");
        p.give_at(vec![7; 1000], now);
        assert_eq!(
            p.take_at(1000, now + Duration::from_secs(6)),
            None,
            "kept past keep_for"
        );
        assert_eq!(p.idle_bytes(), 0);
    }

    #[test]
    fn a_read_that_fails_gives_its_buffer_back() {
        let p = pool(1 << 20);
        let b = p.take(1000);
        assert_eq!(b.as_ref().len(), 1000);
        drop(b);
        assert_eq!(p.idle_bytes(), ROUND, "fresh buffers are whole rounds");
        let b = p.take(ROUND - 5);
        assert_eq!(p.idle_bytes(), 0, "the kept one reused");
        let (buf, len) = b.into_parts();
        assert_eq!((buf.len(), len), (ROUND, ROUND - 5));
        assert_eq!(p.idle_bytes(), 0, "taken out whole");
    }
}
