//! S3 ListObjectsV2 responses: any bytes parse or fail with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = shoal_s3::parse_list_objects_v2(data);
});
