//! Parquet files for tests of inventory reports (S3 Inventory and GCS
//! Storage Insights write Parquet): written with the parquet crate's
//! typed column writers, the way the stores' writers lay them out.

use std::path::Path;

/// One cell of a Parquet test file.
#[derive(Clone, Debug)]
pub enum Cell<'a> {
    Text(&'a str),
    Int(i64),
    Bool(bool),
    Null,
}

/// Writes `rows` as a Parquet file of `schema` (a message type whose
/// columns are all optional except byte arrays named `required`),
/// Snappy-compressed as the stores write them, in two row groups.
pub fn write(path: &Path, schema: &str, rows: &[Vec<Cell>]) {
    use parquet::basic::Compression;
    use parquet::column::writer::ColumnWriter;
    use parquet::data_type::ByteArray;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let schema = std::sync::Arc::new(parquet::schema::parser::parse_message_type(schema).unwrap());
    let props = std::sync::Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let f = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(f, schema.clone(), props).unwrap();
    let half = rows.len().div_ceil(2);
    for group in [&rows[..half], &rows[half..]] {
        let mut rg = w.next_row_group().unwrap();
        let mut i = 0;
        while let Some(mut col) = rg.next_column().unwrap() {
            let required = !schema.get_fields()[i].is_optional();
            let cells: Vec<&Cell> = group.iter().map(|r| &r[i]).collect();
            let defs: Vec<i16> = cells
                .iter()
                .map(|c| i16::from(!matches!(c, Cell::Null)))
                .collect();
            let defs = (!required).then_some(defs.as_slice());
            match col.untyped() {
                ColumnWriter::ByteArrayColumnWriter(c) => {
                    let v: Vec<ByteArray> = cells
                        .iter()
                        .filter_map(|c| match c {
                            Cell::Text(t) => Some(ByteArray::from(*t)),
                            _ => None,
                        })
                        .collect();
                    c.write_batch(&v, defs, None).unwrap();
                }
                ColumnWriter::Int64ColumnWriter(c) => {
                    let v: Vec<i64> = cells
                        .iter()
                        .filter_map(|c| match c {
                            Cell::Int(n) => Some(*n),
                            _ => None,
                        })
                        .collect();
                    c.write_batch(&v, defs, None).unwrap();
                }
                ColumnWriter::BoolColumnWriter(c) => {
                    let v: Vec<bool> = cells
                        .iter()
                        .filter_map(|c| match c {
                            Cell::Bool(b) => Some(*b),
                            _ => None,
                        })
                        .collect();
                    c.write_batch(&v, defs, None).unwrap();
                }
                _ => panic!("column type not used by these tests"),
            }
            col.close().unwrap();
            i += 1;
        }
        rg.close().unwrap();
    }
    w.close().unwrap();
}
