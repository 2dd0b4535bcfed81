//! The bytes every object is made of, and their CRC32C.
//!
//! An object named `size-N` (any prefix, e.g. `bench/size-1073741824`) is N
//! bytes of one fixed 1 MiB block repeated. The block is pseudo-random
//! (xorshift, fixed seed) so nothing downstream can compress or dedupe it
//! cheaply; 1 MiB keeps every response chunk a zero-copy slice of one
//! allocation. The CRC32C of a size is computed once: whole blocks are
//! folded with `crc32c_combine`, so 1 GiB costs 1,024 combines, not a pass.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// Length of the repeating block.
pub const PERIOD: u64 = 1 << 20;
/// Largest frame handed to hyper: big enough to keep per-frame cost low,
/// small enough to keep many connections' buffers modest.
const FRAME: u64 = 256 << 10;

fn block() -> &'static Bytes {
    static BLOCK: OnceLock<Bytes> = OnceLock::new();
    BLOCK.get_or_init(|| {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut v = Vec::with_capacity(PERIOD as usize);
        while v.len() < PERIOD as usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(&x.to_le_bytes());
        }
        Bytes::from(v)
    })
}

/// The size an object name stands for: its last segment `size-N[...]`.
pub fn size_of_name(name: &str) -> Option<u64> {
    let last = name.rsplit('/').next()?;
    let digits = last.strip_prefix("size-")?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// CRC32C of the first `size` bytes of the pattern (cached per size).
pub fn crc_of_size(size: u64) -> u32 {
    static CACHE: OnceLock<Mutex<HashMap<u64, u32>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(c) = cache.lock().unwrap().get(&size) {
        return *c;
    }
    let b = block();
    let whole = crc32c::crc32c(b);
    let mut crc = 0u32;
    for _ in 0..size / PERIOD {
        crc = crc32c::crc32c_combine(crc, whole, PERIOD as usize);
    }
    let rest = (size % PERIOD) as usize;
    if rest > 0 {
        crc = crc32c::crc32c_combine(crc, crc32c::crc32c(&b[..rest]), rest);
    }
    cache.lock().unwrap().insert(size, crc);
    crc
}

/// Bytes `[start, end)` of the pattern as a streaming body.
pub struct PatternBody {
    pos: u64,
    end: u64,
}

impl PatternBody {
    pub fn new(start: u64, end: u64) -> Self {
        PatternBody { pos: start, end }
    }
    /// The next chunk, advancing; `None` at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if self.pos >= self.end {
            return None;
        }
        let off = self.pos % PERIOD;
        let n = (self.end - self.pos).min(PERIOD - off).min(FRAME);
        self.pos += n;
        Some(block().slice(off as usize..(off + n) as usize))
    }
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.next_chunk().map(|b| Ok(Frame::data(b))))
    }
    fn is_end_stream(&self) -> bool {
        self.pos >= self.end
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.end - self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_sizes() {
        assert_eq!(size_of_name("size-1024"), Some(1024));
        assert_eq!(size_of_name("a/b/size-8.bin"), Some(8));
        assert_eq!(size_of_name("size-"), None);
        assert_eq!(size_of_name("other"), None);
    }

    #[test]
    fn combined_crc_matches_a_full_pass() {
        for size in [0, 1, 1000, PERIOD, PERIOD + 7, 3 * PERIOD - 1] {
            let mut body = PatternBody::new(0, size);
            let mut crc = 0;
            while let Some(c) = body.next_chunk() {
                crc = crc32c::crc32c_append(crc, &c);
            }
            assert_eq!(crc, crc_of_size(size), "size {size}");
        }
    }
}
