//! What the server remembers: metadata of uploaded objects and uploads in
//! progress. Never data.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stored::{Stored, fold};

/// An S3 multipart upload in progress: bucket, key, part number → part.
type Multipart = (String, String, BTreeMap<u32, Stored>);

#[derive(Default)]
pub struct State {
    /// (bucket, name) → what was uploaded there.
    objects: Mutex<HashMap<(String, String), Stored>>,
    /// S3 multipart upload id → (bucket, key, part number → part).
    multipart: Mutex<HashMap<String, Multipart>>,
    /// GCS resumable session id → (bucket, name, received so far).
    resumable: Mutex<HashMap<String, (String, String, Stored)>>,
    next_id: AtomicU64,
    /// The synthetic `list-N` buckets (see `list`).
    pub lists: crate::list::Lists,
}

impl State {
    pub fn new_id(&self) -> String {
        format!("bench{:016x}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// An object's size and CRC32C: in a `list-N` bucket, its keys only;
    /// elsewhere uploaded ones first, then generated.
    pub fn lookup(&self, bucket: &str, name: &str) -> Option<Stored> {
        if let Some(keys) = self.lists.get(bucket) {
            return keys.contains(name).then(|| crate::list::object_of(name));
        }
        if let Some(s) = self
            .objects
            .lock()
            .unwrap()
            .get(&(bucket.into(), name.into()))
        {
            return Some(*s);
        }
        let size = crate::pattern::size_of_name(name)?;
        Some(Stored {
            size,
            crc: crate::pattern::crc_of_size(size),
        })
    }
    /// Whether `name` is one whose bytes can be served (generated).
    pub fn uploaded(&self, bucket: &str, name: &str) -> bool {
        self.objects
            .lock()
            .unwrap()
            .contains_key(&(bucket.into(), name.into()))
    }
    pub fn put(&self, bucket: &str, name: &str, s: Stored) {
        self.objects
            .lock()
            .unwrap()
            .insert((bucket.into(), name.into()), s);
    }
    pub fn delete(&self, bucket: &str, name: &str) {
        self.objects
            .lock()
            .unwrap()
            .remove(&(bucket.into(), name.into()));
    }

    pub fn mp_create(&self, bucket: &str, key: &str) -> String {
        let id = self.new_id();
        self.multipart
            .lock()
            .unwrap()
            .insert(id.clone(), (bucket.into(), key.into(), BTreeMap::new()));
        id
    }
    pub fn mp_part(&self, id: &str, n: u32, s: Stored) -> bool {
        match self.multipart.lock().unwrap().get_mut(id) {
            Some(u) => {
                u.2.insert(n, s);
                true
            }
            None => false,
        }
    }
    /// Completes: the parts (all of them, by number) folded into one object.
    pub fn mp_complete(&self, id: &str) -> Option<(String, String, Stored)> {
        let (bucket, key, parts) = self.multipart.lock().unwrap().remove(id)?;
        let s = fold(parts.values().copied());
        self.put(&bucket, &key, s);
        Some((bucket, key, s))
    }
    pub fn mp_abort(&self, id: &str) -> bool {
        self.multipart.lock().unwrap().remove(id).is_some()
    }

    pub fn rs_create(&self, bucket: &str, name: &str) -> String {
        let id = self.new_id();
        self.resumable.lock().unwrap().insert(
            id.clone(),
            (bucket.into(), name.into(), Stored { size: 0, crc: 0 }),
        );
        id
    }
    pub fn rs_get(&self, id: &str) -> Option<(String, String, Stored)> {
        self.resumable.lock().unwrap().get(id).cloned()
    }
    pub fn rs_set(&self, id: &str, s: Stored) {
        if let Some(u) = self.resumable.lock().unwrap().get_mut(id) {
            u.2 = s;
        }
    }
    pub fn rs_finish(&self, id: &str) {
        if let Some((b, n, s)) = self.resumable.lock().unwrap().remove(id) {
            self.put(&b, &n, s);
        }
    }
}
