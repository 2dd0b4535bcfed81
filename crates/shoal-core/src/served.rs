//! What a store that answers requests itself (the local store, the
//! in-memory one of the tests) does as a server would: a listing page cut
//! from sorted keys with prefix, offsets, delimiter and page size, and the
//! checksums a write declares checked against its bytes.

use crate::error::{Error, ErrorKind, Op, Result};
use crate::meta::{ListPage, ListRequest, ObjectMeta};
use crate::store::PutOptions;

/// Applies prefix, offsets, delimiter and paging to sorted `(key, meta)`.
pub fn page_from_sorted<I>(keys: I, req: &ListRequest, max_page: u32) -> ListPage
where
    I: IntoIterator<Item = ObjectMeta>,
{
    let limit = req.max_results.unwrap_or(max_page).clamp(1, max_page) as usize;
    let mut page = ListPage::default();
    let mut count = 0usize;
    let mut last_emitted: Option<String> = None;
    let after = req.page_token.clone();
    for meta in keys {
        let key = &meta.key;
        if !key.starts_with(&req.prefix) {
            continue;
        }
        if req.start_offset.as_ref().is_some_and(|s| key < s) {
            continue;
        }
        if req.end_offset.as_ref().is_some_and(|e| key >= e) {
            // Sorted: nothing further can be before the end.
            break;
        }
        // With a delimiter, a key folds into a common prefix.
        let entry_key = match &req.delimiter {
            Some(d) if !d.is_empty() => match key[req.prefix.len()..].find(d.as_str()) {
                Some(i) => {
                    let p = key[..req.prefix.len() + i + d.len()].to_owned();
                    if page.prefixes.last() == Some(&p) {
                        continue;
                    }
                    Some(p)
                }
                None => None,
            },
            _ => None,
        };
        let sort_key = entry_key.as_deref().unwrap_or(key);
        if after.as_deref().is_some_and(|a| sort_key <= a) {
            continue;
        }
        if count == limit {
            page.next_page_token = last_emitted;
            return page;
        }
        count += 1;
        last_emitted = Some(sort_key.to_owned());
        match entry_key {
            Some(p) => page.prefixes.push(p),
            None => page.objects.push(meta),
        }
    }
    page
}

/// Checks declared checksums against the data, as a validating server would.
pub fn verify_declared(op: Op, url: &str, data: &[u8], opts: &PutOptions) -> Result<()> {
    if let Some(want) = opts.crc32c {
        let got = crc32c::crc32c(data);
        if got != want {
            return Err(Error::new(
                ErrorKind::Integrity,
                op,
                url,
                format!("declared CRC32C {want:08x} but the data has {got:08x}"),
            ));
        }
    }
    if let Some(want) = opts.other_crc {
        let got = want.kind().checksum(data);
        if got != want {
            return Err(Error::new(
                ErrorKind::Integrity,
                op,
                url,
                format!(
                    "declared {} {want} but the data has {got}",
                    want.kind().name()
                ),
            ));
        }
    }
    if let Some(want) = opts.md5
        && crate::checksum::md5_digest(data) != want
    {
        return Err(Error::new(
            ErrorKind::Integrity,
            op,
            url,
            "declared MD5 does not match the data",
        ));
    }
    Ok(())
}
