//! A store around another, for the engine's and the lister's tests: a
//! request spy, latency on tokio's clock, and injected faults, in one
//! place instead of a hand-written store in each test.
//!
//! [`Wrapped`] forwards **every** method of [`Store`], the defaulted ones
//! too, and of each optional part the inner store has ([`MultipartStore`],
//! [`BucketStore`], [`Signer`], [`VersionStore`]: its accessors answer
//! with the wrapper itself where the inner store's answer with a part,
//! None where they answer None), and its [`Capabilities`]: a hand-written
//! test store that forwards only the required methods silently answers
//! the others with the trait's defaults, so a wrapped store that batches
//! deletes, resumes uploads or presigns would stop doing so under test.
//! On the way it
//!
//! - records each request ([`Wrapped::calls`], [`Wrapped::count`]): the
//!   method, bucket, key, a GET's range, a listing's request;
//! - waits before it forwards, as long as [`Wrapped::latency`]'s function
//!   says for that request (on tokio's clock, so a paused test runs in no
//!   time and in an order that repeats);
//! - answers with a [`Fault`] where [`Wrapped::fault`] says so: refused
//!   before the inner store sees it, carried out and its answer lost (a
//!   reset after the request was sent), or a GET body with a flipped
//!   byte (what a checksum must catch);
//! - runs [`Wrapped::after`]'s hook between carrying out a request and
//!   answering it: another writer acting in the window a lost answer
//!   opens.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use shoal_core::{
    BoxByteStream, BucketInfo, BucketStore, ByteRange, Capabilities, CopyRequest, DeleteKey,
    Deleted, Error, ErrorKind, GetResponse, Lack, ListPage, ListRequest, ListedPart,
    MultipartStore, MultipartUpload, ObjectMeta, ObjectVersion, Op, PartInfo, PendingUpload,
    Presign, PutOptions, Result, Scheme, Signer, Store, StoredPart, VersionStore, need,
};

/// Which method of [`Store`], or of one of its parts, a request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)] // the methods of `Store` and its parts, by name
pub enum Method {
    Head,
    ListPage,
    Get,
    Put,
    Delete,
    CreateBucket,
    DeleteBucket,
    ListBuckets,
    MultipartStart,
    MultipartPut,
    MultipartComplete,
    MultipartAbort,
    Parts,
    MultipartResume,
    MultipartUploads,
    Copy,
    Patch,
    PutStream,
    Presign,
    DeleteIf,
    HeadVersion,
    DeleteVersion,
    RestoreSoftDeleted,
    DeleteMany,
}

/// One request as the wrapped store saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Which method.
    pub method: Method,
    /// Its bucket ("" for bucket listings).
    pub bucket: String,
    /// Its key (a multipart request's upload key; a listing's prefix).
    pub key: String,
    /// A GET's range.
    pub range: Option<ByteRange>,
    /// A listing's request.
    pub list: Option<ListRequest>,
}

/// What a request meets instead of a plain answer.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Answered with an error of this kind before the inner store sees
    /// the request.
    Refuse(ErrorKind),
    /// Carried out by the inner store, then answered with an error of
    /// this kind: the answer was lost. A batch delete leaves the keys of
    /// [`Wrapped::batch_leaves`] (a batch the server carried out in part).
    LoseAnswer(ErrorKind),
    /// A GET whose body's first byte is flipped.
    Corrupt,
}

type Latency = Box<dyn Fn(&Call) -> Duration + Send + Sync>;
type After = Box<dyn Fn(Arc<dyn Store>) -> BoxFuture<'static, ()> + Send + Sync>;

/// A store around `inner`: see the module docs.
pub struct Wrapped {
    inner: Arc<dyn Store>,
    calls: Mutex<Vec<Call>>,
    latency: Option<Latency>,
    faults: Vec<(Method, Fault)>,
    after: Vec<(Method, After)>,
    delete_batch: Option<usize>,
    batch_leaves: Vec<String>,
}

impl std::fmt::Debug for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapped")
            .field("inner", &self.inner)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl Wrapped {
    /// `inner`, forwarded to as it is.
    pub fn new(inner: Arc<dyn Store>) -> Wrapped {
        Wrapped {
            inner,
            calls: Mutex::new(Vec::new()),
            latency: None,
            faults: Vec::new(),
            after: Vec::new(),
            delete_batch: None,
            batch_leaves: Vec::new(),
        }
    }

    /// Each request waits `f(call)` on tokio's clock before it is
    /// forwarded.
    pub fn latency(mut self, f: impl Fn(&Call) -> Duration + Send + Sync + 'static) -> Wrapped {
        self.latency = Some(Box::new(f));
        self
    }

    /// Every request of `method` meets `fault`.
    pub fn fault(mut self, method: Method, fault: Fault) -> Wrapped {
        self.faults.push((method, fault));
        self
    }

    /// After a request of `method` is carried out and before it is
    /// answered, `f` runs with the inner store (another writer).
    pub fn after(
        mut self,
        method: Method,
        f: impl Fn(Arc<dyn Store>) -> BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Wrapped {
        self.after.push((method, Box::new(f)));
        self
    }

    /// Batch deletes of up to `n` keys, whatever the inner store takes.
    pub fn batch_size(mut self, n: usize) -> Wrapped {
        self.delete_batch = Some(n);
        self
    }

    /// Keys a batch delete whose answer is lost did not delete.
    pub fn batch_leaves(mut self, keys: &[&str]) -> Wrapped {
        self.batch_leaves = keys.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// Every request so far, in the order they came.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("calls").clone()
    }

    /// How many requests of `method` came so far.
    pub fn count(&self, method: Method) -> usize {
        let calls = self.calls.lock().expect("calls");
        calls.iter().filter(|c| c.method == method).count()
    }

    /// Forgets the requests so far.
    pub fn clear(&self) {
        self.calls.lock().expect("calls").clear();
    }

    fn fault_of(&self, method: Method) -> Option<&Fault> {
        self.faults
            .iter()
            .find(|(m, _)| *m == method)
            .map(|(_, f)| f)
    }

    /// Records the request, waits its latency, and refuses it if a fault
    /// says so.
    async fn enter(&self, call: Call) -> Result<()> {
        let method = call.method;
        let wait = self.latency.as_ref().map(|f| f(&call));
        self.calls.lock().expect("calls").push(call);
        if let Some(d) = wait {
            tokio::time::sleep(d).await;
        }
        match self.fault_of(method) {
            Some(Fault::Refuse(kind)) => {
                Err(injected(*kind, method, "refused (an injected fault)"))
            }
            _ => Ok(()),
        }
    }

    /// The answer to a request the inner store carried out: after the
    /// hooks, lost if a fault says so.
    async fn leave<T>(&self, method: Method, r: Result<T>) -> Result<T> {
        for (m, f) in &self.after {
            if *m == method {
                f(self.inner.clone()).await;
            }
        }
        match self.fault_of(method) {
            Some(Fault::LoseAnswer(kind)) => Err(injected(
                *kind,
                method,
                "connection reset after the request was sent (an injected fault)",
            )),
            _ => r,
        }
    }

    async fn call(&self, method: Method, bucket: &str, key: &str) -> Result<()> {
        self.enter(Call {
            method,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            range: None,
            list: None,
        })
        .await
    }
}

/// An injected fault's error, named by the method it met.
fn injected(kind: ErrorKind, method: Method, what: &str) -> Error {
    let op = match method {
        Method::Head | Method::HeadVersion => Op::Stat,
        Method::ListPage | Method::MultipartUploads | Method::Parts => Op::List,
        Method::Get => Op::Download,
        Method::Put | Method::PutStream => Op::Upload,
        Method::Delete | Method::DeleteIf | Method::DeleteVersion | Method::DeleteMany => {
            Op::Delete
        }
        Method::CreateBucket => Op::CreateBucket,
        Method::DeleteBucket => Op::DeleteBucket,
        Method::ListBuckets => Op::ListBuckets,
        Method::Copy | Method::RestoreSoftDeleted => Op::Copy,
        Method::Patch => Op::Update,
        Method::Presign => Op::Presign,
        _ => Op::Multipart,
    };
    Error::new(kind, op, format!("{method:?}"), what)
}

#[async_trait::async_trait]
impl Store for Wrapped {
    fn scheme(&self) -> Scheme {
        self.inner.scheme()
    }

    /// The inner store's, asked each time (a GCS store's batch size may
    /// drop while it runs), with [`Wrapped::batch_size`]'s batch size.
    fn capabilities(&self) -> Capabilities {
        let inner = self.inner.capabilities();
        Capabilities {
            delete_batch: self.delete_batch.unwrap_or(inner.delete_batch),
            ..inner
        }
    }

    // Each part is the wrapper's own, recording and forwarding, where
    // the inner store has it; None where it has not, as the inner says.
    fn multipart(&self) -> Option<&dyn MultipartStore> {
        self.inner.multipart().map(|_| self as &dyn MultipartStore)
    }

    fn buckets(&self) -> Option<&dyn BucketStore> {
        self.inner.buckets().map(|_| self as &dyn BucketStore)
    }

    fn signer(&self) -> Option<&dyn Signer> {
        self.inner.signer().map(|_| self as &dyn Signer)
    }

    fn versions(&self) -> Option<&dyn VersionStore> {
        self.inner.versions().map(|_| self as &dyn VersionStore)
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        self.call(Method::Head, bucket, key).await?;
        let r = self.inner.head(bucket, key).await;
        self.leave(Method::Head, r).await
    }

    async fn list_page(&self, bucket: &str, req: &ListRequest) -> Result<ListPage> {
        self.enter(Call {
            method: Method::ListPage,
            bucket: bucket.to_owned(),
            key: req.prefix.clone(),
            range: None,
            list: Some(req.clone()),
        })
        .await?;
        let r = self.inner.list_page(bucket, req).await;
        self.leave(Method::ListPage, r).await
    }

    async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: ByteRange,
        version: Option<&ObjectVersion>,
    ) -> Result<GetResponse> {
        self.enter(Call {
            method: Method::Get,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            range: Some(range),
            list: None,
        })
        .await?;
        let r = self.inner.get(bucket, key, range, version).await;
        let mut resp = self.leave(Method::Get, r).await?;
        if matches!(self.fault_of(Method::Get), Some(Fault::Corrupt)) {
            let mut first = true;
            resp.body = resp
                .body
                .map(move |c| {
                    c.map(|c| {
                        if std::mem::take(&mut first) && !c.is_empty() {
                            let mut v = c.to_vec();
                            v[0] ^= 0x01;
                            Bytes::from(v)
                        } else {
                            c
                        }
                    })
                })
                .boxed();
        }
        Ok(resp)
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.call(Method::Put, bucket, key).await?;
        let r = self.inner.put(bucket, key, data, opts).await;
        self.leave(Method::Put, r).await
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<()> {
        self.call(Method::Delete, bucket, key).await?;
        let r = self.inner.delete(bucket, key).await;
        self.leave(Method::Delete, r).await
    }

    async fn copy(&self, req: &CopyRequest<'_>) -> Result<ObjectMeta> {
        self.call(Method::Copy, req.dst_bucket, req.dst_key).await?;
        let r = self.inner.copy(req).await;
        self.leave(Method::Copy, r).await
    }

    async fn patch(
        &self,
        bucket: &str,
        key: &str,
        seen: &ObjectMeta,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.call(Method::Patch, bucket, key).await?;
        let r = self.inner.patch(bucket, key, seen, opts).await;
        self.leave(Method::Patch, r).await
    }

    async fn put_stream(
        &self,
        bucket: &str,
        key: &str,
        body: BoxByteStream,
        opts: &PutOptions,
    ) -> Result<ObjectMeta> {
        self.call(Method::PutStream, bucket, key).await?;
        let r = self.inner.put_stream(bucket, key, body, opts).await;
        self.leave(Method::PutStream, r).await
    }

    async fn delete_if(&self, bucket: &str, key: &str, version: &ObjectVersion) -> Result<Deleted> {
        self.call(Method::DeleteIf, bucket, key).await?;
        let r = self.inner.delete_if(bucket, key, version).await;
        self.leave(Method::DeleteIf, r).await
    }

    async fn delete_many(&self, bucket: &str, keys: &[DeleteKey]) -> Result<Vec<Result<()>>> {
        self.call(Method::DeleteMany, bucket, "").await?;
        let carried: Vec<DeleteKey> = keys
            .iter()
            .filter(|k| !self.batch_leaves.contains(&k.key))
            .cloned()
            .collect();
        let r = self.inner.delete_many(bucket, &carried).await;
        // The keys left out answer in their places as the store would have:
        // deleted (their answer is lost with the rest when a fault says so).
        let r = r.map(|done| {
            let mut done = done.into_iter();
            keys.iter()
                .map(|k| match self.batch_leaves.contains(&k.key) {
                    true => Ok(()),
                    false => done.next().unwrap_or(Ok(())),
                })
                .collect()
        });
        self.leave(Method::DeleteMany, r).await
    }
}

#[async_trait::async_trait]
impl MultipartStore for Wrapped {
    async fn multipart_start(
        &self,
        bucket: &str,
        key: &str,
        opts: &PutOptions,
    ) -> Result<MultipartUpload> {
        self.call(Method::MultipartStart, bucket, key).await?;
        let r = need(self.inner.multipart(), Lack::Multipart, bucket, key)?
            .multipart_start(bucket, key, opts)
            .await;
        self.leave(Method::MultipartStart, r).await
    }

    async fn multipart_put(
        &self,
        upload: &MultipartUpload,
        part_number: u32,
        data: Bytes,
        crc32c: u32,
    ) -> Result<PartInfo> {
        self.call(Method::MultipartPut, &upload.bucket, &upload.key)
            .await?;
        let r = need(
            self.inner.multipart(),
            Lack::Multipart,
            &upload.bucket,
            &upload.key,
        )?
        .multipart_put(upload, part_number, data, crc32c)
        .await;
        self.leave(Method::MultipartPut, r).await
    }

    async fn multipart_complete(
        &self,
        upload: &MultipartUpload,
        parts: &[PartInfo],
        crc32c: Option<u32>,
    ) -> Result<ObjectMeta> {
        self.call(Method::MultipartComplete, &upload.bucket, &upload.key)
            .await?;
        let r = need(
            self.inner.multipart(),
            Lack::Multipart,
            &upload.bucket,
            &upload.key,
        )?
        .multipart_complete(upload, parts, crc32c)
        .await;
        self.leave(Method::MultipartComplete, r).await
    }

    async fn multipart_abort(&self, upload: &MultipartUpload) -> Result<()> {
        self.call(Method::MultipartAbort, &upload.bucket, &upload.key)
            .await?;
        let r = need(
            self.inner.multipart(),
            Lack::Multipart,
            &upload.bucket,
            &upload.key,
        )?
        .multipart_abort(upload)
        .await;
        self.leave(Method::MultipartAbort, r).await
    }

    async fn parts(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&ObjectVersion>,
    ) -> Result<Option<Vec<StoredPart>>> {
        self.call(Method::Parts, bucket, key).await?;
        let r = need(self.inner.multipart(), Lack::Multipart, bucket, key)?
            .parts(bucket, key, version)
            .await;
        self.leave(Method::Parts, r).await
    }

    fn multipart_keep(&self, upload: &MultipartUpload) {
        if let Some(m) = self.inner.multipart() {
            m.multipart_keep(upload)
        }
    }

    async fn multipart_resume(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        opts: &PutOptions,
    ) -> Result<(MultipartUpload, Vec<ListedPart>)> {
        self.call(Method::MultipartResume, bucket, key).await?;
        let r = need(self.inner.multipart(), Lack::ResumeUploads, bucket, key)?
            .multipart_resume(bucket, key, upload_id, opts)
            .await;
        self.leave(Method::MultipartResume, r).await
    }

    async fn multipart_uploads(&self, bucket: &str, prefix: &str) -> Result<Vec<PendingUpload>> {
        self.call(Method::MultipartUploads, bucket, prefix).await?;
        let r = need(self.inner.multipart(), Lack::ListUploads, bucket, prefix)?
            .multipart_uploads(bucket, prefix)
            .await;
        self.leave(Method::MultipartUploads, r).await
    }
}

#[async_trait::async_trait]
impl BucketStore for Wrapped {
    async fn create_bucket(&self, bucket: &str) -> Result<()> {
        self.call(Method::CreateBucket, bucket, "").await?;
        let r = need(self.inner.buckets(), Lack::CreateBucket, bucket, "")?
            .create_bucket(bucket)
            .await;
        self.leave(Method::CreateBucket, r).await
    }

    async fn delete_bucket(&self, bucket: &str) -> Result<()> {
        self.call(Method::DeleteBucket, bucket, "").await?;
        let r = need(self.inner.buckets(), Lack::DeleteBucket, bucket, "")?
            .delete_bucket(bucket)
            .await;
        self.leave(Method::DeleteBucket, r).await
    }

    async fn list_buckets(&self) -> Result<Vec<BucketInfo>> {
        self.call(Method::ListBuckets, "", "").await?;
        let r = need(self.inner.buckets(), Lack::ListBuckets, "", "")?
            .list_buckets()
            .await;
        self.leave(Method::ListBuckets, r).await
    }
}

#[async_trait::async_trait]
impl Signer for Wrapped {
    async fn presign(&self, bucket: &str, key: &str, p: &Presign) -> Result<String> {
        self.call(Method::Presign, bucket, key).await?;
        let r = need(self.inner.signer(), Lack::Presign, bucket, key)?
            .presign(bucket, key, p)
            .await;
        self.leave(Method::Presign, r).await
    }
}

#[async_trait::async_trait]
impl VersionStore for Wrapped {
    async fn head_version(
        &self,
        bucket: &str,
        key: &str,
        version: &ObjectVersion,
    ) -> Result<ObjectMeta> {
        self.call(Method::HeadVersion, bucket, key).await?;
        let r = need(self.inner.versions(), Lack::HeadVersion, bucket, key)?
            .head_version(bucket, key, version)
            .await;
        self.leave(Method::HeadVersion, r).await
    }

    async fn delete_version(&self, bucket: &str, key: &str, version: &ObjectVersion) -> Result<()> {
        self.call(Method::DeleteVersion, bucket, key).await?;
        let r = need(self.inner.versions(), Lack::DeleteVersion, bucket, key)?
            .delete_version(bucket, key, version)
            .await;
        self.leave(Method::DeleteVersion, r).await
    }

    async fn restore_soft_deleted(
        &self,
        bucket: &str,
        key: &str,
        generation: i64,
        only_if_absent: bool,
    ) -> Result<ObjectMeta> {
        self.call(Method::RestoreSoftDeleted, bucket, key).await?;
        let r = need(self.inner.versions(), Lack::SoftDelete, bucket, key)?
            .restore_soft_deleted(bucket, key, generation, only_if_absent)
            .await;
        self.leave(Method::RestoreSoftDeleted, r).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::memory::MemoryStore;

    /// Requests are recorded and forwarded; a refused one never reaches
    /// the inner store, a lost answer's request does; a corrupt GET has
    /// its first byte flipped; defaulted methods and the optional parts
    /// are forwarded too.
    #[tokio::test(start_paused = true)]
    async fn forwards_records_and_injects() {
        let inner = Arc::new(MemoryStore::new());
        inner.create_bucket("b").await.unwrap();
        let w = Wrapped::new(inner.clone())
            .latency(|c| Duration::from_millis(if c.method == Method::Head { 5 } else { 0 }))
            .fault(Method::Put, Fault::LoseAnswer(ErrorKind::Connect))
            .fault(Method::Delete, Fault::Refuse(ErrorKind::ServerBusy))
            .fault(Method::Get, Fault::Corrupt);
        let body = Bytes::from_static(b"abc");
        assert!(w.put("b", "k", body, &PutOptions::default()).await.is_err());
        let started = tokio::time::Instant::now();
        assert_eq!(
            w.head("b", "k").await.unwrap().size,
            3,
            "the put was carried out"
        );
        assert_eq!(started.elapsed(), Duration::from_millis(5));
        assert!(w.delete("b", "k").await.is_err());
        assert!(
            inner.head("b", "k").await.is_ok(),
            "a refused delete never arrived"
        );
        let mut got = Vec::new();
        let mut r = w.get("b", "k", ByteRange::from(0), None).await.unwrap();
        while let Some(c) = r.body.next().await {
            got.extend_from_slice(&c.unwrap());
        }
        assert_eq!(got, b"`bc");
        assert_eq!(
            w.calls().iter().map(|c| c.method).collect::<Vec<_>>(),
            [Method::Put, Method::Head, Method::Delete, Method::Get]
        );
        assert_eq!(w.count(Method::Get), 1);

        // The parts are the wrapper's, recording, where the inner store
        // has them; none where it has none (the memory store signs no URL
        // and keeps no versions).
        assert!(w.signer().is_none() && w.versions().is_none());
        w.buckets().unwrap().create_bucket("c").await.unwrap();
        let mp = w.multipart().unwrap();
        let up = (mp.multipart_start("c", "m", &PutOptions::default()))
            .await
            .unwrap();
        mp.multipart_abort(&up).await.unwrap();
        assert_eq!(
            w.calls()[4..].iter().map(|c| c.method).collect::<Vec<_>>(),
            [
                Method::CreateBucket,
                Method::MultipartStart,
                Method::MultipartAbort
            ]
        );
        assert_eq!(w.capabilities(), inner.capabilities());
        let seven = Wrapped::new(inner.clone()).batch_size(7);
        assert_eq!(seven.capabilities().delete_batch, 7);

        // A batch carried out in part answers for every key, in its place.
        for k in ["x", "y", "z"] {
            inner
                .put("b", k, Bytes::new(), &PutOptions::default())
                .await
                .unwrap();
        }
        let part = Wrapped::new(inner.clone()).batch_leaves(&["y"]);
        let keys: Vec<DeleteKey> = ["x", "y", "z"].into_iter().map(DeleteKey::any).collect();
        let r = part.delete_many("b", &keys).await.unwrap();
        assert_eq!(r.len(), 3);
        assert!(r.iter().all(|r| r.is_ok()));
        assert!(inner.head("b", "y").await.is_ok(), "left by the batch");
        assert!(inner.head("b", "z").await.is_err());
    }
}
