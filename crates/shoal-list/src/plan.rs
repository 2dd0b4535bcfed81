//! From a URL (literal or glob) to the one list request that narrows it
//! most on the server, and the check every result gets on the client.
//!
//! One request, not several: a glob like `a/*/b/*.txt` could be listed
//! level by level with a delimiter (what gsutil does), but that costs a
//! request per matching directory, which on a cold start is the whole
//! budget. Instead the literal prefix is listed flat, with GCS's
//! `matchGlob` doing the rest server-side where it exists. The delimiter is
//! used only where it cannot hide a match: every wildcard in the last
//! level and no `**`.

use shoal_core::{Capabilities, ListRequest, Location, Projection, Result};

use crate::glob::KeyGlob;

/// What to list and how.
#[derive(Debug, Clone)]
pub struct ListOptions {
    /// Everything below (a literal prefix, or each level a glob matches),
    /// not just one level.
    pub recursive: bool,
    /// What each result must carry (GCS asks for only that with `fields`).
    pub projection: Projection,
    /// Most parallel list requests (1 = sequential). Parallel listing
    /// starts only once the first page shows there is more than one page.
    pub workers: usize,
    /// Results in key order (parallel listing holds later ranges back).
    pub sorted: bool,
    /// Keys per page (None: the backend's maximum).
    pub page_size: Option<u32>,
    /// Every version of each key, noncurrent ones and S3 delete markers
    /// too ([`ListRequest::versions`]): listed in one sequential stream
    /// (a store's version markers do not split into key ranges), and a
    /// literal name lists that key's versions rather than a HEAD.
    pub versions: bool,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            recursive: false,
            projection: Projection::NameOnly,
            workers: crate::parallel::DEFAULT_WORKERS,
            sorted: false,
            page_size: None,
            versions: false,
        }
    }
}

/// Which results a plan keeps.
#[derive(Debug, Clone)]
pub(crate) enum Filter {
    /// Everything the request returns.
    All,
    /// The key itself only (its versions).
    Exact(String),
    /// The key itself or anything below `key/`.
    ExactOrBelow(String),
    /// Keys the glob matches (and common prefixes naming matching levels).
    Glob(KeyGlob),
    /// Keys the glob matches or that lie below a matching level.
    GlobOrBelow(KeyGlob),
}

/// One list request and the client-side check of its results.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The request to send (pages follow from it).
    pub request: ListRequest,
    pub(crate) filter: Filter,
}

impl Plan {
    /// The plan for the objects `loc` names, or None when it names one
    /// object by its literal name (read it with a HEAD instead).
    pub fn objects(
        loc: &Location,
        opts: &ListOptions,
        caps: &Capabilities,
    ) -> Result<Option<Plan>> {
        let url = loc.to_string();
        let base = ListRequest {
            projection: opts.projection,
            max_results: opts.page_size,
            versions: opts.versions,
            ..Default::default()
        };
        let plan = match KeyGlob::parse(&url, &loc.key)? {
            None if !opts.recursive && opts.versions => Plan {
                request: ListRequest {
                    prefix: loc.key.clone(),
                    ..base
                },
                filter: Filter::Exact(loc.key.clone()),
            },
            None if !opts.recursive => return Ok(None),
            None if loc.is_prefix_like() => Plan {
                request: ListRequest {
                    prefix: loc.key.clone(),
                    ..base
                },
                filter: Filter::All,
            },
            None => Plan {
                // `key`, then `key/…`; `key0` is the first name past both
                // ('0' follows '/').
                request: ListRequest {
                    prefix: loc.key.clone(),
                    end_offset: Some(format!("{}0", loc.key)),
                    ..base
                },
                filter: Filter::ExactOrBelow(loc.key.clone()),
            },
            Some(g) if opts.recursive => Plan {
                request: ListRequest {
                    prefix: g.literal_prefix().to_owned(),
                    match_glob: caps.match_glob.then(|| g.match_glob_or_below()).flatten(),
                    ..base
                },
                filter: Filter::GlobOrBelow(g),
            },
            Some(g) => Plan {
                request: ListRequest {
                    prefix: g.literal_prefix().to_owned(),
                    delimiter: g.delimiter_safe().then(|| "/".to_owned()),
                    match_glob: caps
                        .match_glob
                        .then(|| g.match_glob().map(str::to_owned))
                        .flatten(),
                    ..base
                },
                filter: Filter::Glob(g),
            },
        };
        Ok(Some(plan))
    }

    /// The plan for `ls` of a glob: one level shows matching objects and
    /// the common prefixes of matching levels; `-r` is [`Plan::objects`].
    /// Returns None for a literal URL (`ls` has its own rules for those).
    pub fn entries(
        loc: &Location,
        opts: &ListOptions,
        caps: &Capabilities,
    ) -> Result<Option<Plan>> {
        let url = loc.to_string();
        let Some(g) = KeyGlob::parse(&url, &loc.key)? else {
            return Ok(None);
        };
        if opts.recursive || !g.delimiter_safe() {
            return Plan::objects(loc, opts, caps);
        }
        // The matchGlob is "P or anything below it" (`P**`): whether GCS
        // applies it to object names before folding them into common
        // prefixes or to the prefixes themselves, the prefixes of matching
        // levels survive.
        Ok(Some(Plan {
            request: ListRequest {
                prefix: g.literal_prefix().to_owned(),
                delimiter: Some("/".into()),
                match_glob: caps.match_glob.then(|| g.match_glob_or_below()).flatten(),
                projection: opts.projection,
                max_results: opts.page_size,
                versions: opts.versions,
                ..Default::default()
            },
            filter: Filter::Glob(g),
        }))
    }

    /// Whether an object from the listing is one the URL names.
    pub fn keep_object(&self, key: &str) -> bool {
        match &self.filter {
            Filter::All => key.starts_with(&self.request.prefix),
            Filter::Exact(k) => key == k,
            Filter::ExactOrBelow(k) => {
                key.len() >= k.len()
                    && key.starts_with(k.as_str())
                    && (key.len() == k.len() || key.as_bytes()[k.len()] == b'/')
            }
            Filter::Glob(g) => g.matches(key),
            Filter::GlobOrBelow(g) => g.matches_or_below(key),
        }
    }

    /// Whether a common prefix from a delimiter listing is shown.
    pub fn keep_prefix(&self, prefix: &str) -> bool {
        match &self.filter {
            Filter::Glob(g) => g.matches_prefix(prefix),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(glob: bool) -> Capabilities {
        Capabilities {
            match_glob: glob,
            projection: glob,
            end_offset: glob,
            native_multipart: true,
            compose: false,
            min_part_size: 0,
            max_parts: 1,
            max_put_size: 1,
            max_list_page: 1000,
            put_stream: false,
            upload_method: shoal_core::UploadMethod::Auto,
            resumes_uploads: false,
            delete_batch: 1,
        }
    }

    fn obj(url: &str, recursive: bool, gcs: bool) -> Option<Plan> {
        let loc = Location::parse(url).unwrap();
        let opts = ListOptions {
            recursive,
            ..Default::default()
        };
        Plan::objects(&loc, &opts, &caps(gcs)).unwrap()
    }

    #[test]
    fn the_cold_start_example_is_one_narrow_request() {
        let p = obj("gs://b/folder/ABC*.zip", false, true).unwrap();
        assert_eq!(p.request.prefix, "folder/ABC");
        assert_eq!(p.request.delimiter.as_deref(), Some("/"));
        assert_eq!(p.request.match_glob.as_deref(), Some("folder/ABC*.zip"));
        assert_eq!(p.request.projection, Projection::NameOnly);
        assert!(p.keep_object("folder/ABC1.zip"));
        assert!(!p.keep_object("folder/ABC1.zip/x"));
        // S3 gets no matchGlob, the same prefix and delimiter.
        let p = obj("s3://b/folder/ABC*.zip", false, false).unwrap();
        assert_eq!(p.request.match_glob, None);
        assert_eq!(p.request.prefix, "folder/ABC");
    }

    #[test]
    fn globs_that_cross_levels_list_flat() {
        let p = obj("gs://b/logs/**/*.gz", false, true).unwrap();
        assert_eq!(p.request.prefix, "logs/");
        assert_eq!(p.request.delimiter, None);
        let p = obj("gs://b/*/x", false, true).unwrap();
        assert_eq!(p.request.delimiter, None);
    }

    #[test]
    fn recursive_globs_take_what_lies_below() {
        let p = obj("gs://b/d*", true, true).unwrap();
        assert_eq!(p.request.match_glob.as_deref(), Some("d**"));
        assert!(p.keep_object("d1/x/y"));
        assert!(p.keep_object("d2"));
        assert!(!p.keep_object("e/d1"));
    }

    #[test]
    fn literal_urls() {
        assert!(obj("gs://b/a/key", false, true).is_none());
        let p = obj("gs://b/a/key", true, true).unwrap();
        assert_eq!(p.request.end_offset.as_deref(), Some("a/key0"));
        assert!(p.keep_object("a/key"));
        assert!(p.keep_object("a/key/x"));
        assert!(!p.keep_object("a/key-x"));
        let p = obj("gs://b/a/", true, true).unwrap();
        assert!(p.keep_object("a/b/c"));
        assert_eq!(p.request.end_offset, None);
    }

    #[test]
    fn entries_show_matching_levels() {
        let loc = Location::parse("gs://b/d*").unwrap();
        let p = Plan::entries(&loc, &ListOptions::default(), &caps(true))
            .unwrap()
            .unwrap();
        assert_eq!(p.request.match_glob.as_deref(), Some("d**"));
        assert_eq!(p.request.delimiter.as_deref(), Some("/"));
        assert!(p.keep_prefix("d1/"));
        assert!(!p.keep_prefix("e/"));
    }
}
