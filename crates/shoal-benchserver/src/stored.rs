//! What the server knows of an object: its size and CRC32C. The bytes
//! themselves are generated (`pattern`) or discarded, never kept.

/// Size and CRC32C of an object.
#[derive(Clone, Copy, Debug)]
pub struct Stored {
    pub size: u64,
    pub crc: u32,
}

/// Objects one after another, as one.
pub fn fold(parts: impl Iterator<Item = Stored>) -> Stored {
    parts.fold(Stored { size: 0, crc: 0 }, |acc, p| Stored {
        size: acc.size + p.size,
        crc: crc32c::crc32c_combine(acc.crc, p.crc, p.size as usize),
    })
}
