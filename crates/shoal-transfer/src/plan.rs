//! Cutting an object into slices.
//!
//! A slice costs a request: a round trip, maybe a TLS handshake, and TCP
//! slow start before the connection runs at full speed. A slice must be big
//! enough that this fixed cost is small next to its transfer time: at ~100
//! MB/s per connection a 32 MiB slice takes ~0.3 s, so even a 50 ms set-up
//! is under 15%. Hence [`DEFAULT_MIN_SLICE`]: an object smaller than two of
//! these is read as one stream, and no object is cut into more slices than
//! there are workers (more slices than connections only adds requests).

/// Smallest slice worth a request of its own: 32 MiB.
pub(crate) const DEFAULT_MIN_SLICE: u64 = 32 << 20;

/// Byte ranges `[start, end)` covering `0..size`, in order, of near-equal
/// length. `forced` overrides the count (still at least one byte each).
pub(crate) fn plan_slices(
    size: u64,
    workers: usize,
    min_slice: u64,
    forced: Option<usize>,
) -> Vec<(u64, u64)> {
    if size == 0 {
        return vec![(0, 0)];
    }
    let n = match forced {
        Some(n) => (n.max(1) as u64).min(size),
        None => {
            let by_size = (size / min_slice.max(1)).max(1);
            by_size.min(workers.max(1) as u64)
        }
    };
    let base = size / n;
    let extra = size % n;
    let mut out = Vec::with_capacity(n as usize);
    let mut start = 0;
    for i in 0..n {
        let len = base + u64::from(i < extra);
        out.push((start, start + len));
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_cover(size: u64, s: &[(u64, u64)]) {
        assert_eq!(s.first().unwrap().0, 0);
        assert_eq!(s.last().unwrap().1, size);
        for w in s.windows(2) {
            assert_eq!(w[0].1, w[1].0, "no gap, no overlap");
        }
    }

    #[test]
    fn small_objects_are_one_slice() {
        assert_eq!(plan_slices(1, 8, DEFAULT_MIN_SLICE, None), vec![(0, 1)]);
        assert_eq!(plan_slices(63 << 20, 8, DEFAULT_MIN_SLICE, None).len(), 1);
        assert_eq!(plan_slices(0, 8, DEFAULT_MIN_SLICE, None), vec![(0, 0)]);
    }

    #[test]
    fn big_objects_use_every_worker() {
        let s = plan_slices(1 << 30, 4, DEFAULT_MIN_SLICE, None);
        assert_eq!(s.len(), 4);
        check_cover(1 << 30, &s);
    }

    #[test]
    fn forced_counts_and_odd_sizes() {
        for size in [1u64, 2, 7, 1000, (32 << 20) + 1] {
            for n in [1usize, 3, 16] {
                let s = plan_slices(size, 4, DEFAULT_MIN_SLICE, Some(n));
                check_cover(size, &s);
                assert_eq!(s.len() as u64, (n as u64).min(size));
            }
        }
    }
}
