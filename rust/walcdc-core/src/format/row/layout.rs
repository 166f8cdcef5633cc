//! Where a heap record's columns are: the record header, the variable-offset table, the fixed
//! area and bound bits (spec §8.2–§8.3), the sizes and alignments of fixed-width types, and the
//! storage order a representation gives its attributes.

use super::*;

/// Where one column's bytes are in a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// NULL (bound bit clear, or equal variable offsets).
    Null,
    /// The value's bytes: exactly the disk size for a fixed column; from the offset-table entry
    /// to the next one (padding included) for a variable column.
    Bytes(Range<usize>),
    /// The offset table points outside the record.
    Bad(String),
}

/// The decoded layout of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Representation id from word 0.
    pub repid: i32,
    /// MVCC flags from word 0 (`0x01` insert id, `0x02` delete id, `0x04` previous version).
    pub mvcc_flags: u8,
    pub header_size: usize,
    /// Width of a variable-offset-table entry (1, 2 or 4).
    pub offset_size: usize,
    pub has_bound_bits: bool,
    /// One slot per attribute of the representation, in storage order; ranges are record offsets.
    pub slots: Vec<Slot>,
}

/// Whether values of this type live in the variable part of a record.
pub fn is_variable_type(t: i32) -> bool {
    matches!(
        t,
        db_type::STRING
            | db_type::VARNCHAR
            | db_type::VARBIT
            | db_type::SET
            | db_type::MULTISET
            | db_type::SEQUENCE
            | db_type::BLOB
            | db_type::CLOB
            | db_type::ELO
            | db_type::JSON
    )
}

/// Bytes per character a fixed CHAR/NCHAR reserves (`INTL_CODESET_MULT`).
pub(super) fn codeset_multiplier(codeset: i32) -> usize {
    match codeset {
        5 => 4,
        4 => 3,
        _ => 1,
    }
}

/// Disk size of a fixed-width column (§8.3), `None` for variable-width or unknown types or an
/// unusable precision.
pub fn fixed_disk_size(d: &Domain) -> Option<usize> {
    Some(match d.db_type {
        db_type::INTEGER | db_type::FLOAT | db_type::DATE | db_type::TIME | db_type::TIMESTAMP => 4,
        db_type::TIMESTAMPLTZ => 4,
        db_type::BIGINT | db_type::DOUBLE | db_type::DATETIME | db_type::DATETIMELTZ | db_type::TIMESTAMPTZ => 8,
        db_type::OBJECT | db_type::OID => 8,
        db_type::MONETARY | db_type::DATETIMETZ => 12,
        db_type::SHORT | db_type::ENUMERATION => 2,
        db_type::NUMERIC => 16,
        db_type::CHAR | db_type::NCHAR => {
            let n = usize::try_from(d.precision).ok().filter(|&n| n > 0)?;
            let size = n.checked_mul(codeset_multiplier(d.codeset))?;
            if size as u64 > MAX_STRING_LENGTH {
                return None;
            }
            size
        }
        db_type::BIT => {
            let n = usize::try_from(d.precision).ok().filter(|&n| n > 0)?;
            if n as u64 > MAX_STRING_LENGTH {
                return None;
            }
            n.div_ceil(8)
        }
        _ => return None,
    })
}

/// Alignment of a fixed-width type (`pr_type.alignment`), which orders fixed columns (§8.3 rule 2).
pub fn type_alignment(t: i32) -> usize {
    match t {
        db_type::SHORT | db_type::ENUMERATION => 2,
        db_type::NUMERIC | db_type::CHAR | db_type::NCHAR | db_type::BIT => 1,
        _ => 4,
    }
}

/// Word 0 and the header size of a record.
pub(super) fn parse_header(record: &[u8]) -> Result<(u32, usize), String> {
    let word = be_u32(record, 0).ok_or_else(|| format!("record of {} bytes has no header", record.len()))?;
    let size = HEADER_SIZE[((word >> 24) & 7) as usize];
    if record.len() < size {
        return Err(format!("record of {} bytes is shorter than its {size}-byte header", record.len()));
    }
    Ok((word, size))
}

/// The representation id a record was written with (word 0), to pick its [`Representation`].
pub fn record_repid(record: &[u8]) -> Result<i32, String> {
    parse_header(record).map(|(w, _)| (w & 0x00FF_FFFF) as i32)
}

/// Locates every column of `record` (header included) laid out by `rep`.
pub fn row_layout(rep: &Representation, record: &[u8]) -> Result<RowLayout, String> {
    let mut slots = Vec::with_capacity(rep.attributes.len());
    let shape = row_slots(rep, record, &mut slots)?;
    Ok(RowLayout {
        repid: (shape.word & 0x00FF_FFFF) as i32,
        mvcc_flags: heap::mvcc_flags(shape.word),
        header_size: shape.header_size,
        offset_size: shape.offset_size,
        has_bound_bits: shape.word & 0x8000_0000 != 0,
        slots,
    })
}

/// What [`row_slots`] read from a record's header.
pub struct RowShape {
    /// Word 0 (representation id, flags).
    pub word: u32,
    pub header_size: usize,
    pub offset_size: usize,
}

/// [`row_layout`]'s slots, into `slots` (cleared first): a reader decoding row after row
/// reuses one vector rather than allocating one per row.
pub fn row_slots(rep: &Representation, record: &[u8], slots: &mut Vec<Slot>) -> Result<RowShape, String> {
    slots.clear();
    let (word, h) = parse_header(record)?;
    let repid = (word & 0x00FF_FFFF) as i32;
    if rep.repid >= 0 && repid != rep.repid {
        return Err(format!("record has representation {repid}, the schema given is representation {}", rep.repid));
    }
    let offset_size: usize = match (word >> 29) & 3 {
        1 => 1,
        2 => 2,
        _ => 4,
    };
    let has_bb = word & 0x8000_0000 != 0;
    let (n_fixed, n_var) = (rep.n_fixed, rep.n_var);
    if n_fixed.checked_add(n_var) != Some(rep.attributes.len()) {
        return Err(format!(
            "representation {} has {} attributes but n_fixed {n_fixed} + n_var {n_var}",
            rep.repid,
            rep.attributes.len()
        ));
    }
    // Fixed columns: back to back in storage order (placed from 0 here, moved to the fixed
    // part's offset below).
    let mut fixed_sum = 0usize;
    for a in &rep.attributes[..n_fixed] {
        let size = fixed_disk_size(&a.domain)
            .ok_or_else(|| format!("attribute {} (type {}) cannot be in the fixed part", a.name, a.domain.db_type))?;
        let end = fixed_sum.checked_add(size).ok_or("fixed part too large")?;
        slots.push(Slot::Bytes(fixed_sum..end));
        fixed_sum = end;
    }
    for a in &rep.attributes[n_fixed..] {
        if !is_variable_type(a.domain.db_type) {
            return Err(format!("attribute {} (type {}) cannot be in the variable part", a.name, a.domain.db_type));
        }
    }
    let vt = if n_var == 0 { 0 } else { align4(offset_size.checked_mul(n_var + 1).ok_or("offset table too large")?) };
    let fixed_length = align4(fixed_sum);
    let bb = if has_bb { n_fixed.div_ceil(32) * 4 } else { 0 };
    let fixed_at = h + vt;
    let bb_at = fixed_at.checked_add(fixed_length).ok_or("fixed part too large")?;
    let data_at = bb_at + bb;
    if record.len() < data_at {
        return Err(format!(
            "record of {} bytes ends inside its fixed part (header {h}, offset table {vt}, fixed {fixed_length}, \
             bound bits {bb})",
            record.len()
        ));
    }
    for (p, slot) in slots.iter_mut().enumerate() {
        let bound = !has_bb || record[bb_at + (p >> 3)] & (1 << (p & 7)) != 0;
        *slot = match slot {
            Slot::Bytes(r) if bound => Slot::Bytes(fixed_at + r.start..fixed_at + r.end),
            _ => Slot::Null,
        };
    }
    if n_var > 0 {
        let entry = |i: usize| -> Option<usize> {
            let at = h + i * offset_size;
            match offset_size {
                1 => record.get(at).map(|&b| b as usize),
                2 => be_u16(record, at).map(|v| v as i16).and_then(|v| usize::try_from(v).ok()),
                _ => be_i32(record, at).and_then(|v| usize::try_from(v).ok()),
            }
        };
        // The highest start of a column given bytes so far: a start above it is new (the
        // writers' location order); one at or below it must not be an earlier column's, or a
        // hostile row would have many columns decode the same bytes (one row's worth each).
        let mut highest_start = None;
        let mut next = entry(0);
        for j in 0..n_var {
            let (s, e) = (next, entry(j + 1));
            next = e;
            let (Some(s), Some(e)) = (s, e) else {
                slots.push(Slot::Bad(format!("variable column {j}: negative offset")));
                continue;
            };
            if s == e {
                slots.push(Slot::Null);
                continue;
            }
            // Values are laid out in location order; a defensive reader takes the next larger
            // entry when the following one is smaller.
            let e = if e > s { Some(e) } else { (0..=n_var).filter_map(entry).filter(|&x| x > s).min() };
            let slot = match e {
                None => Slot::Bad(format!("variable column {j}: no end offset after {s}")),
                Some(e) if h + s < data_at => {
                    Slot::Bad(format!("variable column {j}: offset {s} points into the fixed part (ends at {e})"))
                }
                Some(e) if h + e > record.len() => Slot::Bad(format!(
                    "variable column {j}: bytes {s}..{e} after the header run past the record end ({} bytes)",
                    record.len()
                )),
                Some(_)
                    if highest_start.is_some_and(|m| h + s <= m)
                        && slots.iter().any(|x| matches!(x, Slot::Bytes(r) if r.start == h + s)) =>
                {
                    Slot::Bad(format!("variable column {j}: offset {s} is an earlier column's"))
                }
                Some(e) => {
                    highest_start = highest_start.max(Some(h + s));
                    Slot::Bytes(h + s..h + e)
                }
            };
            slots.push(slot);
        }
    }
    Ok(RowShape { word, header_size: h, offset_size })
}

/// Storage order of a new representation (log format §8.3 rules 1–3): `candidates` are the
/// previous representation's attributes in storage order followed by the added ones (for CREATE
/// TABLE: the columns in reverse definition order); returns their indexes with the fixed-width
/// ones first, stable-sorted by alignment (descending) and disk size (ascending), then the
/// variable-width ones in the given order.
pub fn storage_order(candidates: &[Domain]) -> Vec<usize> {
    let (mut fixed, var): (Vec<usize>, Vec<usize>) =
        (0..candidates.len()).partition(|&i| !is_variable_type(candidates[i].db_type));
    fixed.sort_by_key(|&i| {
        let d = &candidates[i];
        (std::cmp::Reverse(type_alignment(d.db_type)), fixed_disk_size(d).unwrap_or(0))
    });
    fixed.extend(var);
    fixed
}
