//! Decoded blocks handed to the writer, recycled through a small pool so a
//! stream of 1 MiB blocks does not fault in fresh pages for every one.

use super::*;

/// Bytes for the caller, holding their share of the memory budget until
/// dropped.
#[derive(Debug)]
pub struct Chunk {
    pub(super) data: Bytes,
    pub(super) _hold: Option<OwnedSemaphorePermit>,
    /// Where a decoded block goes back when the caller is done with it.
    pub(super) pool: Option<Arc<BlockPool>>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.put(std::mem::take(&mut self.data));
        }
    }
}

/// Decoded blocks for reuse. A fresh 1 MiB block is fresh pages: the
/// kernel faults and zeroes each of them, and for a dataset that is 256
/// faults per MiB written, a fifth of the CPU of `cat -d`. Blocks come
/// back when the caller drops a [`Chunk`] and holds no other reference to
/// its bytes (hand the chunk itself to a writer thread, not a clone of its
/// bytes, and the block returns after the write).
#[derive(Debug, Default)]
pub(super) struct BlockPool {
    pub(super) kept: Mutex<Vec<bytes::BytesMut>>,
    /// Blocks handed out and not yet dropped: decoded bytes in memory.
    pub(super) out: AtomicUsize,
}

impl BlockPool {
    /// Blocks kept: what a few decoders and a writer's queue have out.
    pub(super) const KEEP: usize = 32;

    pub(super) fn take(&self) -> bytes::BytesMut {
        self.out.fetch_add(1, Ordering::Relaxed);
        let mut b = self
            .kept
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| bytes::BytesMut::with_capacity(BLOCK));
        // Zeroes a block on its first use only: kept blocks are BLOCK long.
        b.resize(BLOCK, 0);
        b
    }

    /// Returns a block handed out by take() (given back or dropped).
    pub(super) fn put(&self, data: Bytes) {
        self.out.fetch_sub(1, Ordering::Relaxed);
        let Ok(mut b) = data.try_into_mut() else {
            return;
        };
        if b.capacity() != BLOCK {
            return;
        }
        // An object's last block comes back short; restoring its length
        // here spares take() zeroing the tail again, a cost paid per block
        // of a `cat` that reads thousands of small objects.
        // SAFETY: this is a block take() made: the same allocation from
        // its start (the capacity says so: a block is never advanced or
        // grown), whose BLOCK bytes take() initialised, and bytes once
        // initialised stay so; truncating only moved `len` back.
        unsafe { b.set_len(BLOCK) };
        let mut kept = self.kept.lock().unwrap();
        if kept.len() < Self::KEEP {
            kept.push(b);
        }
    }
}

impl Chunk {
    /// The bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }
}

impl Chunk {
    /// Bytes that are not a pooled block, with their budget share if any.
    pub(super) fn held(data: Bytes, hold: Option<OwnedSemaphorePermit>) -> Self {
        Chunk {
            data,
            _hold: hold,
            pool: None,
        }
    }
}

/// Bytes of the caller's own (a separator, say) to go out with chunks.
impl From<Bytes> for Chunk {
    fn from(data: Bytes) -> Self {
        Chunk::held(data, None)
    }
}

impl std::ops::Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}
