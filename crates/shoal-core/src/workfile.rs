//! Working files: where a download (or any local write) puts its bytes
//! before they are renamed over the destination.
//!
//! A working file lives beside its destination (a rename must not cross
//! file systems) under a name that no key and no other process can take:
//! `.NAME.shoal-tmp-<32 hex>`, the hex drawn from the OS's randomness
//! (through std's hasher keys) when the file is made, and the file created
//! exclusively (`O_EXCL`), so nothing else is ever opened in its place.
//! Before the rename, the name is checked to still be the file this
//! process wrote: the bytes renamed into place are the bytes that were
//! verified. Predictable names (the pid and a counter, as before) let a
//! bucket holding `.big.bin.shoal-partial` write into another download's
//! file, and two processes write into one.
//!
//! A local walk (an upload of a folder) passes over working files, and
//! only those: [`is_working_file`] matches the exact shape, so a user's
//! file that merely contains `.shoal-tmp-` is copied like any other.
//!
//! A file name holds at most 255 bytes, and the working names add up to
//! 48 to the destination's: a name of more than [`NAME_ROOM`] bytes is
//! cut, in working names only, at a character boundary and ended with
//! `~` and 16 hex digits of a hash of the whole name ([`short_name`]).
//! The hash is fixed (FNV-1a), so a rerun finds the resume journal of the
//! same destination again, and two long names that share their first
//! 190 bytes still get working names of their own.

use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// 32 hex digits nobody can predict: std's `RandomState` keys come from
/// the OS's randomness once per thread; each value mixes in a counter and
/// the time, so no two calls in a process repeat.
pub fn random_token() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut out = String::with_capacity(32);
    for half in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(SEQ.fetch_add(1, Ordering::Relaxed));
        h.write_u128(now);
        h.write_u32(std::process::id());
        h.write_u64(half);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// The most bytes of a destination's name its working names keep whole:
/// `.NAME.shoal-partial-<32 hex>`, the longest of them, then fits in 255.
pub const NAME_ROOM: usize = 255 - ".".len() - ".shoal-partial-".len() - 32;

/// The NAME part of `dest`'s working names: its file name, or for a name
/// longer than [`NAME_ROOM`] bytes its start cut at a character boundary,
/// `~` and 16 hex digits of a fixed hash of the whole name (the same in
/// every run, so a rerun finds the resume journal again).
pub fn short_name(dest: &Path) -> String {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.len() <= NAME_ROOM {
        return name;
    }
    // FNV-1a, 64 bits: fixed, unlike std's hashers.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let mut cut = NAME_ROOM - "~".len() - 16;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~{hash:016x}", &name[..cut])
}

/// `.NAME.<what>-<32 hex>` beside `dest` (NAME as [`short_name`] gives it).
fn working_name(dest: &Path, what: &str) -> PathBuf {
    let name = short_name(dest);
    dest.with_file_name(format!(".{name}.{what}-{}", random_token()))
}

/// Creates a new working file beside `dest`, exclusively, named
/// `.NAME.<what>-<32 hex>` (`what` is `shoal-tmp` or `shoal-partial`).
pub fn create_beside(dest: &Path, what: &str) -> std::io::Result<(PathBuf, File)> {
    loop {
        let path = working_name(dest, what);
        match File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            // Only a 128-bit coincidence gets here.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sizes a working file for a download of `size` bytes and reserves its
/// blocks (`fallocate`), as rclone does: a disk too small fails now with
/// ENOSPC, before a byte is fetched, not at 90% of a 32 GiB download; the
/// file's blocks are allocated once, together, instead of by every slice
/// writer in turn under the inode's lock. File systems that cannot
/// reserve (EOPNOTSUPP: some network file systems) just get the length.
///
/// Not on tmpfs: there, reserving is zeroing every page before the first
/// byte arrives, serial time in front of the download (the memory is
/// taken page by page as the slices land instead).
pub fn preallocate(file: &File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    file.set_len(size)?;
    if size == 0 || is_tmpfs(file) {
        return Ok(());
    }
    let Ok(len) = libc::off_t::try_from(size) else {
        return Ok(());
    };
    // SAFETY: a valid open descriptor; mode 0 allocates without changing
    // what the file holds.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
        _ => Err(e),
    }
}

/// Whether `file` lives on tmpfs (memory, no blocks to reserve).
// `f_type` is i64 here, a narrower type on other targets.
#[allow(clippy::unnecessary_cast)]
fn is_tmpfs(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a valid open descriptor and a buffer of the right type.
    let r = unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) };
    // SAFETY: fstatfs filled it when it returned 0.
    r == 0 && unsafe { st.assume_init() }.f_type as i64 == TMPFS_MAGIC
}

/// Whether `path` names the very file `file` is open on (same device and
/// inode): nobody renamed another file over it.
pub fn is_same_file(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Renames the working file `tmp` (open as `file`) over `dest`, after
/// checking that `tmp` still names `file`.
pub fn persist(tmp: &Path, file: &File, dest: &Path) -> std::io::Result<()> {
    if !is_same_file(tmp, file) {
        return Err(std::io::Error::other(format!(
            "the working file {} was replaced by another writer; nothing was renamed into place",
            tmp.display()
        )));
    }
    std::fs::rename(tmp, dest)
}

/// [`persist`], but never over an existing `dest` (`--no-clobber`): the
/// rename itself refuses, atomically, so a file another writer put there
/// a moment ago is never replaced (a check first would leave that gap).
/// `renameat2(RENAME_NOREPLACE)`; where the file system lacks it, a hard
/// link to `dest` (which fails if `dest` exists) and then the working
/// name removed. An existing `dest` is an error of kind `AlreadyExists`,
/// and the working file is left for the caller to remove.
pub fn persist_new(tmp: &Path, file: &File, dest: &Path) -> std::io::Result<()> {
    if !is_same_file(tmp, file) {
        return Err(std::io::Error::other(format!(
            "the working file {} was replaced by another writer; nothing was renamed into place",
            tmp.display()
        )));
    }
    match rename_noreplace(tmp, dest) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
            std::fs::hard_link(tmp, dest)?;
            let _ = std::fs::remove_file(tmp);
            Ok(())
        }
        r => r,
    }
}

#[cfg(target_os = "linux")]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // The system call itself, not libc's wrapper: musl before 1.2.5 (the
    // static build's) and glibc before 2.28 have no `renameat2`, while
    // every kernel since 3.15 does (an older one answers ENOSYS, and the
    // caller links instead).
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn rename_noreplace(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Removes `path` if it still names `file` (a working file another writer
/// has replaced is theirs now).
pub fn remove_if_same(path: &Path, file: &File) {
    if is_same_file(path, file) {
        let _ = std::fs::remove_file(path);
    }
}

/// Copies the local file `from` to `to` through a working file beside
/// `to` (created, with its folders, as needed): `to` is the old file or
/// the whole new one, never a part. Returns the bytes copied.
pub fn copy_file(from: &Path, to: &Path) -> crate::Result<u64> {
    copy_file_with(from, to, false)
}

/// [`copy_file`]; with `no_clobber` an existing `to` is never replaced
/// ([`persist_new`]): that is an error of kind `Precondition`.
pub fn copy_file_with(from: &Path, to: &Path, no_clobber: bool) -> crate::Result<u64> {
    use crate::error::{Error, Op};
    let from_s = || from.display().to_string();
    let mut src = File::open(from).map_err(|e| Error::io(Op::Copy, from_s(), e))?;
    write_with(to, no_clobber, |file| {
        std::io::copy(&mut src, file).map_err(|e| Error::io(Op::Copy, from_s(), e))
    })
}

/// The one temp-and-rename writer: creates `dest`'s folders and a working
/// file beside it, lets `fill` write the new bytes into it, and renames it
/// over `dest` ([`persist`]; with `no_clobber`, never over an existing one:
/// [`persist_new`], an error of kind `Precondition`). Whatever fails, the
/// working file is removed and `dest` is left as it was. Returns what
/// `fill` returned.
pub fn write_with<T>(
    dest: &Path,
    no_clobber: bool,
    fill: impl FnOnce(&mut File) -> crate::Result<T>,
) -> crate::Result<T> {
    use crate::error::{Error, Op};
    let dest_s = dest.display().to_string();
    if let Some(parent) = dest.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(Op::Write, &dest_s, e))?;
    }
    let (tmp, mut file) =
        create_beside(dest, "shoal-tmp").map_err(|e| Error::io(Op::Write, &dest_s, e))?;
    let written = fill(&mut file).and_then(|v| {
        let done = if no_clobber {
            persist_new(&tmp, &file, dest)
        } else {
            persist(&tmp, &file, dest)
        };
        done.map(|()| v)
            .map_err(|e| persist_error(Op::Write, &dest_s, e))
    });
    if written.is_err() {
        remove_if_same(&tmp, &file);
    }
    written
}

/// The error of a failed [`persist`] or [`persist_new`]: an existing
/// destination (only `persist_new` refuses one) is a `Precondition`, as a
/// store's `if_not_exists` is.
pub fn persist_error(op: crate::error::Op, dest: &str, e: std::io::Error) -> crate::Error {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        return crate::Error::new(
            crate::ErrorKind::Precondition,
            op,
            dest,
            "exists; not replaced (--no-clobber)",
        );
    }
    crate::Error::io(op, dest, e)
}

/// Whether a file name has the exact shape of a working file:
/// `.NAME.shoal-tmp-<32 hex>` or `.NAME.shoal-partial-<32 hex>`, or the
/// resume journal `.NAME.shoal-partial.json`.
pub fn is_working_file(name: &str) -> bool {
    if !name.starts_with('.') {
        return false;
    }
    if name.len() > ".x.shoal-partial.json".len() - 1 && name.ends_with(".shoal-partial.json") {
        return true;
    }
    for what in [".shoal-tmp-", ".shoal-partial-"] {
        if let Some(at) = name.rfind(what) {
            let hex = &name[at + what.len()..];
            if at > 1 && hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `persist_new` never replaces: a destination that exists keeps its
    /// bytes and the refusal says so; a missing one is written.
    #[test]
    fn persist_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("d");
        std::fs::write(&dest, b"theirs").unwrap();
        let (p, mut f) = create_beside(&dest, "shoal-tmp").unwrap();
        std::io::Write::write_all(&mut f, b"ours").unwrap();
        let e = persist_new(&p, &f, &dest).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&dest).unwrap(), b"theirs");
        let e = persist_error(crate::error::Op::Write, "d", e);
        assert_eq!(e.kind(), crate::ErrorKind::Precondition);
        std::fs::remove_file(&dest).unwrap();
        persist_new(&p, &f, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"ours");
        assert!(!p.exists());
        // copy_file_with: the same rule.
        let src = dir.path().join("s");
        std::fs::write(&src, b"new").unwrap();
        let e = copy_file_with(&src, &dest, true).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Precondition);
        assert_eq!(std::fs::read(&dest).unwrap(), b"ours");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "no working file is left behind");
    }

    /// A destination name of 250 bytes (or 255, or of multi-byte
    /// characters) gets working names that fit, stay recognised and unique
    /// per name, and whose NAME part is the same in every run.
    #[test]
    fn long_names_get_working_names_that_fit() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "x".repeat(250),
            "x".repeat(255),
            "é".repeat(127),
            format!("{}{}", "a".repeat(206), "ü".repeat(3)),
        ] {
            let dest = dir.path().join(&name);
            for what in ["shoal-tmp", "shoal-partial"] {
                let (p, f) = create_beside(&dest, what).unwrap();
                let w = p.file_name().unwrap().to_str().unwrap().to_owned();
                assert!(w.len() <= 255, "{} bytes", w.len());
                assert!(is_working_file(&w), "{w}");
                assert!(w.starts_with(&format!(".{}.{what}-", short_name(&dest))));
                std::io::Write::write_all(&mut &f, b"whole").unwrap();
                persist(&p, &f, &dest).unwrap();
                assert_eq!(std::fs::read(&dest).unwrap(), b"whole");
            }
            let short = short_name(&dest);
            assert!(short.len() <= NAME_ROOM);
            assert!(name.starts_with(short.split('~').next().unwrap()));
            assert!(is_working_file(&format!(".{short}.shoal-partial.json")));
        }
        // The same name, the same NAME part; another long name, another.
        let a = short_name(Path::new(&"y".repeat(250)));
        assert_eq!(a, short_name(Path::new(&"y".repeat(250))));
        assert_ne!(a, short_name(Path::new(&"y".repeat(251))));
        assert_eq!(short_name(Path::new("big.bin")), "big.bin");
        let at_limit = "z".repeat(NAME_ROOM);
        assert_eq!(short_name(Path::new(&at_limit)), at_limit);
    }

    #[test]
    fn tokens_differ_and_have_their_shape() {
        let a = random_token();
        let b = random_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn working_files_are_exclusive_and_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("big.bin");
        let (p, f) = create_beside(&dest, "shoal-tmp").unwrap();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with(".big.bin.shoal-tmp-"), "{name}");
        assert!(is_working_file(&name));
        assert!(is_same_file(&p, &f));
        // Another file renamed over it: no longer ours, not renamed, not removed.
        let other = dir.path().join("other");
        std::fs::write(&other, b"theirs").unwrap();
        std::fs::rename(&other, &p).unwrap();
        assert!(!is_same_file(&p, &f));
        assert!(persist(&p, &f, &dest).is_err());
        remove_if_same(&p, &f);
        assert_eq!(std::fs::read(&p).unwrap(), b"theirs");
        assert!(!dest.exists());
        for user in [
            ".big.bin.shoal-partial",
            "big.bin.shoal-tmp-0123456789abcdef0123456789abcdef",
            ".a.shoal-tmp-1-2",
            ".a.shoal-tmp-0123456789abcdef0123456789abcdeg",
            "x.shoal-partial.json",
            "notes about .shoal-tmp- files",
        ] {
            assert!(!is_working_file(user), "{user}");
        }
        assert!(is_working_file(".a.shoal-partial.json"));
        assert!(is_working_file(
            ".a.b.shoal-partial-0123456789abcdef0123456789ABCDEF"
        ));
    }
}
