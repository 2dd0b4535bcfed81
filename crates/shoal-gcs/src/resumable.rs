//! Resumable uploads (todo).
