//! The commit this build is made from, for `shoal --version` and
//! `shoal.__commit__`: `SHOAL_COMMIT` (the hash, or `unknown`) and
//! `SHOAL_BUILT_FROM` (a phrase for people). `SHOAL_BUILD_COMMIT` when set (scripts/dist.sh sets it,
//! with `-dirty` for uncommitted changes), else `git rev-parse HEAD` when
//! this crate is tracked by the enclosing git repository, else a phrase
//! saying the source came without git metadata (a tarball or an sdist), so
//! such a build still works and says so. shoal-py's build.rs is the same
//! file: each crate must build alone from an sdist, which holds only the
//! crates the package needs.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn main() {
    println!("cargo::rerun-if-env-changed=SHOAL_BUILD_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    let commit = match std::env::var("SHOAL_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        // Only our own repository: a tarball unpacked inside someone
        // else's checkout must not report that checkout's commit.
        _ => match git(dir, &["ls-files", "--error-unmatch", "Cargo.toml"])
            .and_then(|_| git(dir, &["rev-parse", "--short=12", "HEAD"]))
        {
            Some(c) => {
                // A new commit or checkout moves HEAD or the branch it names.
                for p in ["HEAD", "refs", "packed-refs"] {
                    for base in ["--git-dir", "--git-common-dir"] {
                        if let Some(d) = git(dir, &["rev-parse", base]) {
                            let path = dir.join(d).join(p);
                            if path.exists() {
                                println!("cargo::rerun-if-changed={}", path.display());
                            }
                        }
                    }
                }
                Some(c)
            }
            None => None,
        },
    };
    let built_from = match &commit {
        Some(c) => format!("commit {c}"),
        None => "commit unknown: built from a source archive without git metadata".to_owned(),
    };
    println!(
        "cargo::rustc-env=SHOAL_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo::rustc-env=SHOAL_BUILT_FROM={built_from}");
}
