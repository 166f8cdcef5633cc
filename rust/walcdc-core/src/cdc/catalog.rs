//! The schema catalog of a stream: class records learned from the log (applied when their
//! transaction commits) and given by the user, and rows decoded with them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use crate::cdc::chase::Image;
use crate::error::Result;
use crate::format::heap::{self, REC_BIGONE, REC_HOME, REC_NEWHOME, REC_RELOCATION};
use crate::format::le;
use crate::format::rcvindex::{
    RVHF_DELETE, RVHF_INSERT, RVHF_INSERT_NEWHOME, RVHF_UPDATE, RVOVF_NEWPAGE_INSERT, RVOVF_PAGE_UPDATE,
};
use crate::format::rectype::{
    LOG_ABORT, LOG_COMMIT, LOG_COMPENSATE, LOG_DIFF_UNDOREDO_DATA, LOG_REDO_DATA, LOG_UNDOREDO_DATA,
};
use crate::log::record::Record;
use crate::log::source::LogSource;

const RVOVF_NEWPAGE_LINK: i32 = 55;
const RVOVF_CHANGE_LINK: i32 = 57;
use crate::format::row::layout::Slot;
use crate::format::row::RowRoom;
use crate::format::schema::{self, Attribute, ClassSchema, Representation};
use crate::format::supplemental::Oid;
use crate::format::{class_record, row};
use crate::log::payload::ReadPayloads;

/// One column of a typed table (a table's current columns, in definition order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableColumn {
    /// Attribute id: rows of any representation are matched by it.
    pub id: i32,
    pub name: String,
    pub domain: schema::Domain,
    pub primary_key: bool,
}

/// A change to a class that a transaction made.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum ClassChange {
    Upsert(Box<ClassSchema>),
    Drop(Oid),
}

type Vpid = (i16, i32);

/// Reassembles an overflow record from page images: first page `[next VPID 8][length 4][data]`,
/// following pages `[next VPID 8][data]`. Returns the record and the pages it used.
fn overflow_record(page: &dyn Fn(Vpid) -> Option<Vec<u8>>, first: Vpid) -> Option<(Vec<u8>, Vec<Vpid>)> {
    let p = page(first)?;
    let length = usize::try_from(heap::overflow_length(&p)?).ok()?;
    let mut out = p.get(heap::OVERFLOW_FIRST_HEADER..)?.to_vec();
    let mut used = vec![first];
    let mut next = p;
    while out.len() < length {
        let vpid = heap::overflow_next(&next)?;
        if used.len() > 100_000 {
            return None;
        }
        next = page(vpid)?;
        used.push(vpid);
        out.extend_from_slice(next.get(heap::OVERFLOW_HEADER..)?);
    }
    out.truncate(length);
    Some((out, used))
}

/// Follows the heap of class records (the root-class heap) through the log: home slots,
/// relocated records (whose updates happen on the new-home slot), and records larger than a page
/// (whose updates may rewrite only their overflow pages). Emits class changes per transaction.
///
/// Memory stays bounded: overflow page images are kept only while their transaction is open,
/// and afterwards only for the pages of class records.
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ClassTracker {
    /// New-home slot → home slot (the class OID).
    #[serde(serialize_with = "crate::format::sorted::map")]
    home_of: HashMap<Oid, Oid>,
    /// Images of `RVHF_INSERT_NEWHOME` not yet claimed by their home slot's relocation.
    #[serde(serialize_with = "crate::format::sorted::map")]
    pending_newhome: HashMap<Oid, Vec<u8>>,
    /// Big class records: class OID → first overflow page.
    #[serde(serialize_with = "crate::format::sorted::map")]
    chains: HashMap<Oid, Vpid>,
    /// Overflow pages of big class records.
    #[serde(serialize_with = "crate::format::sorted::map")]
    class_pages: HashMap<Vpid, Vec<u8>>,
    /// Overflow pages of class records written by open transactions.
    #[serde(serialize_with = "crate::format::sorted::map_of_maps")]
    txn_pages: HashMap<i32, HashMap<Vpid, Vec<u8>>>,
    /// Pages that kept pages link to (the rest of a class record's chain).
    #[serde(serialize_with = "crate::format::sorted::set")]
    linked: std::collections::HashSet<Vpid>,
    /// Last class images, to tell real changes from rewrites of the same bytes.
    #[serde(serialize_with = "crate::format::sorted::map")]
    last: HashMap<Oid, Vec<u8>>,
}

impl ClassTracker {
    /// Remembers the page a kept overflow page links to (`next_vpid` at its start).
    fn link_next(&mut self, page: &[u8]) {
        if let Some(vpid) = heap::overflow_next(page) {
            self.linked.insert(vpid);
        }
    }

    fn page(&self, trid: i32, v: Vpid) -> Option<Vec<u8>> {
        self.txn_pages.get(&trid).and_then(|m| m.get(&v)).or_else(|| self.class_pages.get(&v)).cloned()
    }

    fn image(&mut self, oid: Oid, row: &[u8], out: &mut Vec<ClassChange>) {
        if !class_record::looks_like_class_record(row) || self.last.get(&oid).is_some_and(|l| l == row) {
            return;
        }
        if let Ok(s) = class_record::parse_class_record(oid, row) {
            self.last.insert(oid, row.to_vec());
            out.push(ClassChange::Upsert(Box::new(s)));
        }
    }

    fn home_image(&mut self, trid: i32, slot: Oid, image: &[u8], out: &mut Vec<ClassChange>) {
        if image.len() < 2 {
            return;
        }
        let body = &image[2..];
        match le::i16_at(image, 0) {
            REC_HOME => {
                self.chains.remove(&slot);
                self.image(slot, body, out);
            }
            REC_NEWHOME => match self.home_of.get(&slot).copied() {
                Some(home) => self.image(home, body, out),
                None => {
                    if class_record::looks_like_class_record(body) {
                        self.pending_newhome.insert(slot, body.to_vec());
                    }
                }
            },
            REC_RELOCATION if body.len() == 8 => {
                let newhome = Oid::from_native(body);
                self.chains.remove(&slot);
                self.home_of.retain(|_, h| *h != slot);
                self.home_of.insert(newhome, slot);
                if let Some(row) = self.pending_newhome.remove(&newhome) {
                    self.image(slot, &row, out);
                }
            }
            REC_BIGONE if body.len() == 8 => {
                let fwd = Oid::from_native(body);
                let first = (fwd.volid, fwd.pageid);
                let found = overflow_record(&|v| self.page(trid, v), first);
                if let Some((row, used)) = found {
                    if class_record::looks_like_class_record(&row) {
                        for v in used {
                            if let Some(p) = self.page(trid, v) {
                                self.class_pages.insert(v, p);
                            }
                        }
                        self.chains.insert(slot, first);
                        self.home_of.retain(|_, h| *h != slot);
                        self.image(slot, &row, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// At a transaction's end: its overflow pages of class records become the class pages, and
    /// class records whose pages it rewrote are read again.
    fn end(&mut self, trid: i32, committed: bool, out: &mut Vec<ClassChange>) {
        let Some(pages) = self.txn_pages.remove(&trid) else { return };
        // Links of this transaction's pages matter only while it runs or for class pages.
        let class_pages = &self.class_pages;
        self.linked.retain(|v| class_pages.contains_key(v) || !pages.contains_key(v));
        let mut touched = false;
        for (v, p) in pages {
            // A rollback's compensations restore the pages: take them in either case.
            if let Some(old) = self.class_pages.get_mut(&v) {
                *old = p;
                touched = true;
            }
        }
        if !touched || !committed {
            return;
        }
        let chains: Vec<(Oid, Vpid)> = self.chains.iter().map(|(o, f)| (*o, *f)).collect();
        for (oid, first) in chains {
            if let Some((row, _)) = overflow_record(&|v| self.class_pages.get(&v).cloned(), first) {
                self.image(oid, &row, out);
            }
        }
    }

    /// What a record does to class records; the changes belong to the record's transaction
    /// (and take effect when it commits).
    pub fn record(&mut self, log: &dyn LogSource, rec: &Record, out: &mut Vec<ClassChange>) -> Result<()> {
        if matches!(rec.rectype, LOG_COMMIT | LOG_ABORT) {
            self.end(rec.trid, rec.rectype == LOG_COMMIT, out);
            return Ok(());
        }
        let Some((rcv, slot)) = tracked(rec) else { return Ok(()) };
        let (volid, pageid) = (slot.volid, slot.pageid);
        let compensate = rec.rectype == LOG_COMPENSATE;
        let (mut undo, mut redo) = (Vec::new(), Vec::new());
        log.images(rec, &mut undo, &mut redo)?;
        // A compensation carries the restored bytes in its only payload.
        let new: &[u8] = if compensate { &undo } else { &redo };
        let vpid = (volid, pageid);
        match rcv {
            RVOVF_NEWPAGE_INSERT | RVOVF_PAGE_UPDATE => {
                // Keep only pages of class records (memory stays bounded however large the
                // rows of user tables are): a first page whose data starts like a class
                // record, a page such a page links to, or a page of a known class record.
                let first_of_class = first_overflow_page_of_class(new);
                let wanted = first_of_class || self.class_pages.contains_key(&vpid) || self.linked.contains(&vpid);
                if !new.is_empty() && wanted {
                    self.link_next(new);
                    self.txn_pages.entry(rec.trid).or_default().insert(vpid, new.to_vec());
                }
            }
            RVOVF_NEWPAGE_LINK | RVOVF_CHANGE_LINK => {
                if new.len() == 8 {
                    if let Some(mut p) = self.page(rec.trid, vpid).filter(|p| p.len() >= 8) {
                        p[..8].copy_from_slice(new);
                        self.link_next(&p);
                        self.txn_pages.entry(rec.trid).or_default().insert(vpid, p);
                    }
                }
            }
            // Undoing an insert removes the slot.
            RVHF_INSERT if compensate => {
                if self.last.remove(&slot).is_some() {
                    out.push(ClassChange::Drop(slot));
                }
            }
            RVHF_DELETE if !compensate => {
                if self.last.remove(&slot).is_some() {
                    out.push(ClassChange::Drop(slot));
                }
                self.chains.remove(&slot);
                self.home_of.remove(&slot);
                self.home_of.retain(|_, h| *h != slot);
            }
            RVHF_INSERT => {
                self.home_of.remove(&slot);
                self.home_image(rec.trid, slot, new, out);
            }
            _ => self.home_image(rec.trid, slot, new, out),
        }
        Ok(())
    }
}

/// The recovery index and slot of a record the tracker reads (heap and overflow writes of
/// data records), `None` for every other record.
fn tracked(rec: &Record) -> Option<(i32, Oid)> {
    if !matches!(rec.rectype, LOG_REDO_DATA | LOG_UNDOREDO_DATA | LOG_DIFF_UNDOREDO_DATA | LOG_COMPENSATE) {
        return None;
    }
    let (rcv, slot) = (rec.rcvindex()?, rec.data_oid()?);
    let heap = matches!(rcv, RVHF_INSERT | RVHF_DELETE | RVHF_UPDATE | RVHF_INSERT_NEWHOME);
    let ovf = matches!(rcv, RVOVF_NEWPAGE_INSERT | RVOVF_NEWPAGE_LINK | RVOVF_PAGE_UPDATE | RVOVF_CHANGE_LINK);
    (heap || ovf).then_some((rcv, slot))
}

/// Whether the first page of an overflow record holds the start of a class record
/// (`[next VPID 8][length 4][class record...]`, the record's header at byte 12).
fn first_overflow_page_of_class(page: &[u8]) -> bool {
    page.len() >= 16 && page[12] == 0x60 && le::i32_at(page, 8) >= 160
}

/// For a record the class tracker reads (see [`ClassTracker::record`]): `Some(true)` when one
/// of its images is (the start of) a class record, `Some(false)` when it is another heap or
/// overflow write; `None` for records the tracker ignores. Decided from the record alone, so
/// that a reader of one range of the log can pick out the writes that matter to the catalog:
/// a transaction with no class-record image never changes a class record.
pub fn class_record_write(log: &dyn LogSource, rec: &Record) -> Result<Option<bool>> {
    if rec.trid <= 0 {
        return Ok(None);
    }
    let Some((rcv, _)) = tracked(rec) else { return Ok(None) };
    let (mut undo, mut redo) = (Vec::new(), Vec::new());
    log.images(rec, &mut undo, &mut redo)?;
    let classish = |img: &[u8]| match rcv {
        RVOVF_NEWPAGE_INSERT | RVOVF_PAGE_UPDATE => first_overflow_page_of_class(img),
        RVOVF_NEWPAGE_LINK | RVOVF_CHANGE_LINK => false,
        _ => img.get(2..).is_some_and(class_record::looks_like_class_record),
    };
    Ok(Some(classish(&undo) || classish(&redo)))
}

/// Representation id of a user-given layout that serves rows of any representation.
pub const ANY_REPID: i32 = -1;

/// A column of a user-given schema.
#[derive(Clone, Debug)]
pub struct UserColumn {
    pub name: String,
    pub def_order: i32,
    pub domain: crate::format::schema::Domain,
    pub primary_key: bool,
}

/// One column of a decoded row: where its key and value lie in the row's JSON (written once,
/// in place, with nothing allocated per column).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodedColumn {
    /// Attribute id (stable across ALTER and RENAME COLUMN).
    pub id: i32,
    /// The key the row's JSON uses for it (see [`KeyMode`]), as a JSON string literal.
    pub key: std::ops::Range<usize>,
    /// The value as JSON text.
    pub value: std::ops::Range<usize>,
    pub primary_key: bool,
}

/// A row decoded to JSON: `{"column": value, ...}` in column order, and the values per column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodedRow {
    /// Canonical JSON object text.
    pub json: String,
    /// The columns in column order.
    pub columns: Vec<DecodedColumn>,
    /// Columns whose bytes could not be explained (`column: reason`); their JSON value is
    /// null, and the event says why in `decode_error`.
    pub problems: Vec<String>,
}

impl DecodedRow {
    /// `{"pk column": value, ...}` of the primary-key columns, `None` for a table without one.
    pub fn key_json(&self) -> Option<String> {
        let keys = self.columns.iter().filter(|c| c.primary_key);
        let mut out = String::with_capacity(keys.clone().map(|c| c.key.len() + c.value.len() + 2).sum::<usize>() + 1);
        for c in keys {
            out.push(if out.is_empty() { '{' } else { ',' });
            out.push_str(self.key(c));
            out.push(':');
            out.push_str(self.value(c));
        }
        (!out.is_empty()).then(|| out + "}")
    }

    /// A column's key, as a JSON string literal.
    pub fn key<'a>(&'a self, c: &DecodedColumn) -> &'a str {
        &self.json[c.key.clone()]
    }

    /// A column's value, as JSON text.
    pub fn value<'a>(&'a self, c: &DecodedColumn) -> &'a str {
        &self.json[c.value.clone()]
    }

    /// A column's key (its name, or its attribute id as text).
    pub fn name(&self, c: &DecodedColumn) -> String {
        let key = self.key(c);
        match key.strip_prefix('"').and_then(|k| k.strip_suffix('"')) {
            // Nearly every name has nothing escaped: the literal's inside is the name.
            Some(inner) if !inner.contains('\\') => inner.to_owned(),
            _ => serde_json::from_str(key).unwrap_or_default(),
        }
    }
}

/// Which keys the JSON of a decoded row uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KeyMode {
    /// Column names in force when the change happened (a row written before a RENAME COLUMN
    /// and changed after it uses the new name; a dropped column keeps its last name).
    #[default]
    NameThen,
    /// Column names at the end of the log (the catalog the caller passes).
    NameNow,
    /// Attribute ids, as text (stable across RENAME COLUMN and ALTER).
    Id,
}

crate::choices!(KeyMode, "keys", { "name_then" => KeyMode::NameThen, "name_now" => KeyMode::NameNow, "id" => KeyMode::Id });

/// Classes known to a stream.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Catalog {
    #[serde(serialize_with = "crate::format::sorted::map")]
    classes: HashMap<Oid, ClassSchema>,
    /// Partition class → its partitioned (root) class.
    #[serde(serialize_with = "crate::format::sorted::map")]
    parent: HashMap<Oid, Oid>,
    #[serde(serialize_with = "crate::format::sorted::set")]
    dropped: HashSet<Oid>,
    /// Every name each class had, oldest first (RENAME TABLE); the last is its current one.
    #[serde(serialize_with = "crate::format::sorted::map")]
    names: HashMap<Oid, Vec<Arc<str>>>,
    /// Changes whenever the catalog does (a value no other catalog has had, from a
    /// process-wide counter; a clone keeps it, as it holds the same classes): what a reader
    /// remembers of the catalog holds while this does not change.
    #[serde(skip, default = "fresh_epoch")]
    epoch: u64,
}

fn fresh_epoch() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Catalog {
    pub fn apply(&mut self, change: ClassChange) {
        self.epoch = fresh_epoch();
        match change {
            ClassChange::Upsert(s) => {
                for sub in &s.subclasses {
                    self.parent.insert(*sub, s.oid);
                }
                self.dropped.remove(&s.oid);
                let names = self.names.entry(s.oid).or_default();
                if names.last().map(|n| &**n) != Some(s.name.as_str()) {
                    names.push(Arc::from(s.name.as_str()));
                }
                match self.classes.get_mut(&s.oid) {
                    // Keep the layouts of representations the new record no longer lists.
                    Some(old) => {
                        let mut merged = *s;
                        // A class record names only its current columns; its old representations
                        // take those names by attribute id. Each old representation keeps the
                        // names it had while it was current (RENAME COLUMN), and a dropped
                        // column (`attr#<id>` in the new record) the name the previous record
                        // still knew.
                        let known: HashMap<i32, (String, i32)> = old
                            .representations
                            .values()
                            .flat_map(|r| r.attributes.iter())
                            .filter(|a| !a.name.starts_with("attr#"))
                            .map(|a| (a.id, (a.name.clone(), a.def_order)))
                            .collect();
                        let current = merged.current_repid;
                        for rep in merged.representations.values_mut().filter(|r| r.repid != current) {
                            rep.json_keys = Default::default(); // its names change below
                            let earlier = old.representations.get(&rep.repid);
                            for a in rep.attributes.iter_mut() {
                                let was = earlier
                                    .and_then(|r| r.attributes.iter().find(|x| x.id == a.id))
                                    .filter(|x| !x.name.starts_with("attr#"))
                                    .map(|x| (&x.name, x.def_order));
                                match was {
                                    Some((name, order)) => {
                                        a.name = name.clone();
                                        a.def_order = order;
                                    }
                                    None if a.name.starts_with("attr#") => {
                                        if let Some((name, order)) = known.get(&a.id) {
                                            a.name = name.clone();
                                            a.def_order = *order;
                                        }
                                    }
                                    None => {}
                                }
                            }
                        }
                        for (id, rep) in old.representations.drain() {
                            merged.representations.entry(id).or_insert(rep);
                        }
                        *old = merged;
                    }
                    None => {
                        self.classes.insert(s.oid, *s);
                    }
                }
            }
            ClassChange::Drop(oid) => {
                self.dropped.insert(oid);
            }
        }
    }

    /// Adds a class given by the user (tables created before the log window).
    pub fn add(&mut self, schema: ClassSchema) {
        self.apply(ClassChange::Upsert(Box::new(schema)));
    }

    /// Adds a table described by its columns in definition order (a schema file). The storage
    /// order is derived as CUBRID lays out a freshly created table: columns in reverse
    /// definition order, fixed-width ones first, stable-sorted by alignment (descending) and
    /// disk size (ascending). Without `repid` the layout serves rows of any representation the
    /// log does not describe.
    pub fn add_columns(&mut self, oid: Oid, name: &str, repid: Option<i32>, columns: Vec<UserColumn>) {
        let mut cols: Vec<(usize, UserColumn)> = columns.into_iter().enumerate().collect();
        cols.sort_by_key(|(i, c)| std::cmp::Reverse((c.def_order, *i as i32)));
        let domains: Vec<_> = cols.iter().map(|(_, c)| c.domain.clone()).collect();
        let n_fixed = domains.iter().filter(|d| !row::layout::is_variable_type(d.db_type)).count();
        let n_var = domains.len() - n_fixed;
        let mut slots: Vec<Option<(usize, UserColumn)>> = cols.into_iter().map(Some).collect();
        let attributes: Vec<Attribute> = row::layout::storage_order(&domains)
            .into_iter()
            .filter_map(|k| slots[k].take())
            .map(|(i, c)| Attribute {
                id: i as i32,
                name: c.name,
                def_order: c.def_order,
                domain: c.domain,
                primary_key: c.primary_key,
                default_value: None,
            })
            .collect();
        let rid = repid.unwrap_or(ANY_REPID);
        let mut representations = HashMap::new();
        representations.insert(rid, Representation::new(rid, attributes, n_fixed, n_var));
        self.add(ClassSchema {
            oid,
            name: name.to_string(),
            current_repid: rid,
            representations,
            subclasses: Vec::new(),
            flags: 0,
            class_type: 0,
        });
    }

    pub fn classes(&self) -> impl Iterator<Item = &ClassSchema> {
        self.classes.values()
    }

    pub fn get(&self, oid: Oid) -> Option<&ClassSchema> {
        self.classes.get(&oid)
    }

    pub fn is_dropped(&self, oid: Oid) -> bool {
        self.dropped.contains(&oid)
    }

    /// The class a change is reported under: the partitioned table for a partition. (Sub-classes
    /// of inheritance are not partitions: CUBRID names partition classes `<table>__p__<name>`.)
    pub fn root(&self, oid: Oid) -> Oid {
        let mut cur = oid;
        for _ in 0..8 {
            // Most classes have no parent: their name is not looked at.
            match self.parent.get(&cur) {
                Some(&p) if p != cur && self.name(cur).is_some_and(|n| n.contains("__p__")) => cur = p,
                _ => break,
            }
        }
        cur
    }

    /// The class's name as stored (owner-qualified), when known.
    pub fn name(&self, oid: Oid) -> Option<&str> {
        self.classes.get(&oid).map(|c| c.name.as_str())
    }

    /// Every name the class had (oldest first); the last is its current one.
    pub fn names(&self, oid: Oid) -> &[Arc<str>] {
        self.names.get(&oid).map_or(&[], |v| &v[..])
    }

    /// The table an event of `class` is reported under (its partitioned table for a
    /// partition) and that table's name as stored (the class's own when the table's is not
    /// known).
    pub fn table_of(&self, class: Oid) -> (Oid, Option<&str>) {
        let root = self.root(class);
        (root, self.name(root).or_else(|| self.name(class)))
    }

    /// Whether the catalog may have changed since it had this `epoch` (see [`Catalog::epoch`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The column names of a class's current representation, by attribute id.
    fn current_names(&self, class: Oid) -> Option<HashMap<i32, &str>> {
        let c = self.classes.get(&class)?;
        let rep = c.representations.get(&c.current_repid)?;
        Some(rep.attributes.iter().map(|a| (a.id, a.name.as_str())).collect())
    }

    /// The current representation of `class` (its id) and its columns in definition order,
    /// for a typed table.
    pub fn table_columns(&self, class: Oid) -> Option<(i32, Vec<TableColumn>)> {
        let c = self.classes.get(&class)?;
        let rep = c.representations.get(&c.current_repid)?;
        let mut attrs: Vec<&Attribute> = rep.attributes.iter().collect();
        attrs.sort_by_key(|a| (a.def_order < 0, a.def_order, a.id));
        let columns = attrs
            .into_iter()
            .map(|a| TableColumn {
                id: a.id,
                name: a.name.clone(),
                domain: a.domain.clone(),
                primary_key: a.primary_key,
            })
            .collect();
        Some((c.current_repid, columns))
    }

    /// Finds the representation a row was written with.
    pub fn representation(&self, class: Oid, repid: i32) -> Option<(&ClassSchema, &Representation)> {
        let c = self.classes.get(&class)?;
        c.representations.get(&repid).map(|r| (c, r))
    }

    /// Decodes a heap image of `class` to JSON, keyed by the names in force now (in this
    /// catalog). `Err` says why it cannot be decoded (unknown schema or representation, corrupt
    /// row); the raw image stays available to the caller.
    pub fn decode(&self, class: Oid, img: &Image) -> std::result::Result<DecodedRow, String> {
        self.decode_keyed(class, img, KeyMode::NameThen, None)
    }

    /// The representation an image of `class` was written with, and whether it is the class's
    /// current one.
    fn representation_of(&self, class: Oid, img: &Image) -> std::result::Result<(&Representation, bool), String> {
        if img.row.len() < 4 {
            return Err("image shorter than a record header".into());
        }
        let repid = (le::be_u32_at(&img.row, 0) & 0x00FF_FFFF) as i32;
        let Some(c) = self.classes.get(&class) else {
            return Err(format!("schema unknown for class {class} (created before the log window?)"));
        };
        let found = |id: i32| c.representations.get(&id).map(|r| (r, id == c.current_repid));
        found(repid).or_else(|| found(ANY_REPID)).ok_or_else(|| format!("representation {repid} of {} unknown", c.name))
    }

    /// The image's representation, its values (storage order) and the columns that did not
    /// decode (`column: reason`).
    fn decode_row<'a>(
        &'a self,
        class: Oid,
        img: &Image,
    ) -> std::result::Result<(&'a Representation, Vec<row::Value>, Vec<String>), String> {
        let (rep, _) = self.representation_of(class, img)?;
        let values = row::decode_row(rep, &img.row)?;
        let problems: Vec<String> = rep
            .attributes
            .iter()
            .zip(values.iter())
            .filter_map(|(a, v)| v.undecoded().map(|reason| format!("column {}: {reason}", a.name)))
            .collect();
        Ok((rep, values, problems))
    }

    /// An image's column values by attribute id (for typed builders, which name the columns
    /// themselves), and the columns that did not decode (`column: reason`).
    pub fn decode_values(
        &self,
        class: Oid,
        img: &Image,
    ) -> std::result::Result<(crate::format::row::RowValues, Vec<String>), String> {
        let (rep, values, problems) = self.decode_row(class, img)?;
        let ids = rep.attributes.iter().map(|a| a.id);
        Ok((crate::format::row::RowValues(ids.zip(values).collect()), problems))
    }

    /// As [`Catalog::decode`], with the JSON keys `keys` asks for; `now` is the catalog at the
    /// end of the log (for [`KeyMode::NameNow`]; without it, this catalog's names are used).
    pub fn decode_keyed(
        &self,
        class: Oid,
        img: &Image,
        keys: KeyMode,
        now: Option<&Catalog>,
    ) -> std::result::Result<DecodedRow, String> {
        let mut row = DecodedRow::default();
        self.decode_keyed_into(class, img, keys, now, &mut RowRoom::default(), &mut row)?;
        Ok(row)
    }

    /// [`Catalog::decode_keyed`] into `out` (its JSON, columns and problems replaced), in
    /// `room`: a stream decoding row after row reuses both, and writes each value's JSON from
    /// the row's bytes (no value built per column).
    pub fn decode_keyed_into(
        &self,
        class: Oid,
        img: &Image,
        keys: KeyMode,
        now: Option<&Catalog>,
        room: &mut RowRoom,
        out: &mut DecodedRow,
    ) -> std::result::Result<(), String> {
        // Rows of the current representation (nearly all) are keyed by its own names.
        let (rep, current) = self.representation_of(class, img)?;
        let RowRoom { slots, text } = room;
        row::layout::row_slots(rep, &img.row, slots)?;
        let renamed = match keys {
            KeyMode::Id => None,
            KeyMode::NameThen if current => None,
            KeyMode::NameThen => self.current_names(class),
            KeyMode::NameNow => now.unwrap_or(self).current_names(class),
        };
        let plan = rep.json_keys();
        // The representation's own names, escaped once, unless the keys are ids or other names.
        let own_names = renamed.is_none() && !matches!(keys, KeyMode::Id);
        let DecodedRow { json, columns, problems } = out;
        json.clear();
        json.reserve(64 + img.row.len() * 2);
        columns.clear();
        problems.clear();
        // Problems are told in storage order, whatever order the columns are written in.
        let mut undecoded: Vec<(usize, String)> = Vec::new();
        json.push('{');
        let placed = plan.order.iter().filter_map(|&i| Some((i, rep.attributes.get(i)?, slots.get(i)?)));
        for (n, (i, a, slot)) in placed.enumerate() {
            if n > 0 {
                json.push(',');
            }
            let key_at = json.len();
            match keys {
                _ if own_names => json.push_str(&plan.names[i]),
                KeyMode::Id => {
                    let _ = write!(json, "\"{}\"", a.id);
                }
                _ => json_string(json, renamed.as_ref().and_then(|m| m.get(&a.id)).copied().unwrap_or(&a.name)),
            }
            let key = key_at..json.len();
            json.push(':');
            let value_at = json.len();
            let reason = match slot {
                Slot::Null => {
                    json.push_str("null");
                    None
                }
                Slot::Bad(reason) => {
                    json.push_str("null");
                    Some(reason.clone())
                }
                Slot::Bytes(r) => row::column_json_into(json, &a.domain, &img.row[r.clone()], text),
            };
            if let Some(reason) = reason {
                undecoded.push((i, format!("column {}: {reason}", a.name)));
            }
            columns.push(DecodedColumn { id: a.id, key, value: value_at..json.len(), primary_key: a.primary_key });
        }
        json.push('}');
        undecoded.sort_by_key(|&(i, _)| i);
        problems.extend(undecoded.into_iter().map(|(_, p)| p));
        // One huge compressed string must not keep its room for the rest of the stream.
        if text.capacity() > MAX_KEPT_TEXT {
            *text = Vec::new();
        }
        Ok(())
    }
}

/// The most room for unzipped strings a reader keeps between rows.
const MAX_KEPT_TEXT: usize = 1 << 20;

/// Room a stream reuses to decode rows: a row's, and its two images decoded.
#[derive(Default)]
pub struct RowScratch {
    pub room: RowRoom,
    pub before: DecodedRow,
    pub after: DecodedRow,
}

pub use crate::format::row::text::push_json_str as json_string;

/// Names of the columns whose values differ between two decoded images (by attribute id).
pub fn changed_columns(before: &DecodedRow, after: &DecodedRow) -> Vec<String> {
    // Both images are mostly of one representation: columns in the same order.
    let was = |i: usize, id: i32| match before.columns.get(i).filter(|c| c.id == id) {
        Some(c) => Some(before.value(c)),
        None => before.columns.iter().find(|c| c.id == id).map(|c| before.value(c)),
    };
    after
        .columns
        .iter()
        .enumerate()
        .filter(|(i, c)| was(*i, c.id).is_none_or(|o| o != after.value(c)))
        .map(|(_, c)| after.name(c))
        .collect()
}

/// Learns every committed class record of a log set (for `walcdc schema`): one forward walk,
/// class changes staged per transaction and applied at its commit.
pub fn learn<S: LogSource + 'static>(
    log: &std::sync::Arc<S>,
    on_encrypted: crate::log::walker::OnEncrypted,
) -> Result<Catalog> {
    Ok(learn_until(log, None, on_encrypted)?.0)
}

/// Class changes of transactions still open, by trid: they take effect when their
/// transaction commits and are dropped when it aborts. A record with a NULL `prev_tranlsa`
/// starts a new transaction under its trid (a reused trid never inherits the old changes).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Staging {
    #[serde(serialize_with = "crate::format::sorted::map")]
    by_trid: HashMap<i32, Vec<ClassChange>>,
    #[serde(skip)]
    scratch: Vec<ClassChange>,
}

impl Staging {
    /// What `rec` does to class records, staged under its transaction.
    pub fn record(&mut self, tracker: &mut ClassTracker, log: &dyn LogSource, rec: &Record) -> Result<()> {
        if rec.prev_tranlsa.is_null() {
            self.by_trid.remove(&rec.trid);
        }
        tracker.record(log, rec, &mut self.scratch)?;
        if !self.scratch.is_empty() {
            self.by_trid.entry(rec.trid).or_default().append(&mut self.scratch);
        }
        Ok(())
    }

    /// The transaction ended: its changes go into `catalog` if it committed.
    pub fn end(&mut self, trid: i32, committed: bool, catalog: &mut Catalog) {
        if let Some(changes) = self.by_trid.remove(&trid) {
            if committed {
                for c in changes {
                    catalog.apply(c);
                }
            }
        }
    }

    /// Takes the changes a transaction has staged (at its end, or when a new transaction
    /// starts under its trid).
    pub fn take(&mut self, trid: i32) -> Vec<ClassChange> {
        self.by_trid.remove(&trid).unwrap_or_default()
    }

    /// The changes a transaction has staged so far.
    pub fn of(&self, trid: i32) -> &[ClassChange] {
        self.by_trid.get(&trid).map_or(&[], |v| &v[..])
    }
}

/// Learns the committed class records before `end` (all, if `None`), and returns the tracker
/// state to go on from there and the class changes of transactions still open at `end` (they
/// take effect if those transactions commit after it).
pub fn learn_until<S: LogSource + 'static>(
    log: &std::sync::Arc<S>,
    end: Option<crate::format::lsa::Lsa>,
    on_encrypted: crate::log::walker::OnEncrypted,
) -> Result<(Catalog, ClassTracker, Staging)> {
    let seed = (Catalog::default(), ClassTracker::default(), Staging::default());
    learn_from(log, seed, None, end, on_encrypted)
}

/// [`learn_until`] going on from what the class records said at `from` (`seed`, as
/// [`learn_until`] returns it for `from`): the walk starts there.
pub fn learn_from<S: LogSource + 'static>(
    log: &std::sync::Arc<S>,
    seed: (Catalog, ClassTracker, Staging),
    from: Option<crate::format::lsa::Lsa>,
    end: Option<crate::format::lsa::Lsa>,
    on_encrypted: crate::log::walker::OnEncrypted,
) -> Result<(Catalog, ClassTracker, Staging)> {
    let (mut catalog, mut tracker, mut staging) = seed;
    // A start given by a checkpoint must be a record's (the checkpoint may come from a file).
    let mut w = crate::log::walker::Walker::checked(log.clone(), from, end, on_encrypted)?;
    while let Some(rec) = w.next_ref()? {
        if rec.trid <= 0 {
            continue;
        }
        staging.record(&mut tracker, &**log, rec)?;
        match rec.rectype {
            LOG_COMMIT => staging.end(rec.trid, true, &mut catalog),
            LOG_ABORT => staging.end(rec.trid, false, &mut catalog),
            _ => {}
        }
    }
    Ok((catalog, tracker, staging))
}

/// What the class records of a log say at one record boundary `at`: the committed catalog,
/// the class-record tracker and the class changes of transactions still open there (what
/// [`learn_until`] returns for `at`). Kept beside a cursor, it spares the next stream the walk
/// from the beginning of the log to learn the tables defined before it: that stream learns
/// from `at` only (a checkpoint is at or before the cursor's restart point).
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct CatalogCheckpoint {
    pub at: crate::format::lsa::Lsa,
    pub db_creation: i64,
    pub catalog: Catalog,
    pub tracker: ClassTracker,
    pub staging: Staging,
}

impl std::fmt::Debug for CatalogCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogCheckpoint").field("at", &self.at).field("db_creation", &self.db_creation).finish()
    }
}

/// A catalog checkpoint's bytes (version 1).
const CHECKPOINT_BYTES: crate::cdc::framed::Framed =
    crate::cdc::framed::Framed { magic: b"WALCDCCK", version: 1, what: "a walcdc catalog checkpoint" };

impl CatalogCheckpoint {
    pub fn to_bytes(&self) -> Vec<u8> {
        CHECKPOINT_BYTES.encode(self, 0)
    }

    /// A checkpoint from [`CatalogCheckpoint::to_bytes`]; other bytes are an `InvalidArgument`
    /// error (nothing in them is trusted for an allocation size).
    pub fn from_bytes(bytes: &[u8]) -> Result<CatalogCheckpoint> {
        CHECKPOINT_BYTES.decode(bytes)
    }

    /// The checkpoint can seed a stream of `log` that starts at `start`.
    pub fn check(&self, log: &dyn LogSource, start: crate::format::lsa::Lsa) -> Result<()> {
        let bad = |msg: String| Err(crate::error::LogError::InvalidArgument { msg });
        if self.db_creation != log.db_creation() {
            return bad(format!(
                "the catalog checkpoint belongs to another database (db_creation {}), this log set's is {}",
                self.db_creation,
                log.db_creation()
            ));
        }
        if self.at > start {
            return bad(format!("the catalog checkpoint at {} is past the start {start}", self.at));
        }
        Ok(())
    }

    /// What the class records say at `end` (at or after the checkpoint; `None`: the end of
    /// the log), learned from it.
    pub fn learn_until<S: LogSource + 'static>(
        &self,
        log: &std::sync::Arc<S>,
        end: Option<crate::format::lsa::Lsa>,
        on_encrypted: crate::log::walker::OnEncrypted,
    ) -> Result<(Catalog, ClassTracker, Staging)> {
        let seed = (self.catalog.clone(), self.tracker.clone(), self.staging.clone());
        if end == Some(self.at) {
            return Ok(seed);
        }
        learn_from(log, seed, Some(self.at), end, on_encrypted)
    }

    /// Transactions with class work staged at the checkpoint (their end decides it).
    pub fn open_trids(&self) -> Vec<i32> {
        let mut t: Vec<i32> = self.staging.by_trid.keys().chain(self.tracker.txn_pages.keys()).copied().collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}

#[cfg(test)]
mod checkpoint_tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_rejects_other_bytes() {
        let mut catalog = Catalog::default();
        catalog.add_columns(Oid { pageid: 7, slotid: 1, volid: 0 }, "t", Some(0), Vec::new());
        let cp = CatalogCheckpoint {
            at: crate::format::lsa::Lsa::new(12, 40),
            db_creation: 99,
            catalog,
            tracker: ClassTracker::default(),
            staging: Staging::default(),
        };
        let bytes = cp.to_bytes();
        let back = CatalogCheckpoint::from_bytes(&bytes).unwrap();
        assert_eq!((back.at, back.db_creation), (cp.at, 99));
        assert_eq!(back.catalog.name(Oid { pageid: 7, slotid: 1, volid: 0 }), Some("t"));
        for bad in [&bytes[..bytes.len() - 3], &bytes[1..], &[bytes.as_slice(), &[0]].concat()[..], b"WALCDCCK\x09\x00"]
        {
            assert!(matches!(CatalogCheckpoint::from_bytes(bad), Err(crate::error::LogError::InvalidArgument { .. })));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoded row of `(attribute id, name, JSON value)` columns; id 1 is the primary key.
    fn row(cols: &[(i32, &str, &str)]) -> DecodedRow {
        let mut json = String::from("{");
        let mut columns = Vec::new();
        for (n, (id, name, value)) in cols.iter().enumerate() {
            if n > 0 {
                json.push(',');
            }
            let at = json.len();
            json_string(&mut json, name);
            let key = at..json.len();
            json.push(':');
            let at = json.len();
            json.push_str(value);
            columns.push(DecodedColumn { id: *id, key, value: at..json.len(), primary_key: *id == 1 });
        }
        json.push('}');
        DecodedRow { json, columns, problems: Vec::new() }
    }

    #[test]
    fn an_events_table_is_its_classs_name_whatever_a_read_back_catalog_says_of_its_names() {
        let (t, other) = (Oid { pageid: 10, slotid: 1, volid: 0 }, Oid { pageid: 11, slotid: 1, volid: 0 });
        let mut c = Catalog::default();
        c.add_columns(t, "dba.t", None, Vec::new());
        assert_eq!(c.table_of(t), (t, Some("dba.t")));
        // A catalog from a cursor file whose names disagree with its classes (or lack them).
        c.names.insert(t, vec![Arc::from("dba.other")]);
        assert_eq!(c.table_of(t), (t, Some("dba.t")));
        c.names.remove(&t);
        assert_eq!(c.table_of(t), (t, Some("dba.t")));
        assert_eq!(c.table_of(other), (other, None));
    }

    #[test]
    fn a_catalog_changes_its_epoch_with_its_classes_and_keeps_it_in_a_clone() {
        let t = Oid { pageid: 10, slotid: 1, volid: 0 };
        let mut c = Catalog::default();
        c.add_columns(t, "dba.t", None, Vec::new());
        let (first, clone) = (c.epoch(), c.clone());
        assert_eq!(clone.epoch(), first);
        c.add_columns(t, "dba.u", None, Vec::new());
        assert_ne!(c.epoch(), first);
        let bytes = postcard::to_allocvec(&clone).unwrap();
        let back: Catalog = postcard::from_bytes(&bytes).unwrap();
        assert!(![first, c.epoch()].contains(&back.epoch()), "a catalog read back is a new one");
    }

    /// A table of every common column kind, and rows of it: `(values by column, as written)`.
    fn typed_rows() -> (Catalog, Oid, Vec<Image>) {
        use crate::format::row::Value;
        use crate::format::schema::{db_type, Domain};
        let class = Oid { pageid: 9, slotid: 2, volid: 0 };
        let domain = |db_type, precision, codeset| Domain { db_type, precision, codeset, ..Domain::default() };
        let columns = [
            ("id", domain(db_type::INTEGER, -1, 0), true),
            ("name", domain(db_type::STRING, 200, 5), false),
            ("code", domain(db_type::CHAR, 6, 5), false),
            ("price", domain(db_type::DOUBLE, -1, 0), false),
            ("at", domain(db_type::DATETIME, -1, 0), false),
            ("amount", Domain { scale: 2, ..domain(db_type::NUMERIC, 12, 0) }, false),
            ("latin", domain(db_type::STRING, 20, 3), false),
        ];
        let mut catalog = Catalog::default();
        let user = |(i, (name, domain, primary_key)): (usize, &(&str, Domain, bool))| UserColumn {
            name: name.to_string(),
            def_order: i as i32,
            domain: domain.clone(),
            primary_key: *primary_key,
        };
        catalog.add_columns(class, "dba.t", Some(1), columns.iter().enumerate().map(user).collect());
        let rep = &catalog.classes[&class].representations[&1];
        let mut images = Vec::new();
        for i in 0..64i64 {
            let long = "\u{e9}x\"y".repeat(i as usize * 7); // past 255 bytes: the long form; escapes
            let by_name = |name: &str| -> Value {
                match name {
                    "id" => Value::Int(i),
                    "name" if i % 5 == 0 => Value::Null,
                    "name" => Value::String { bytes: long.clone().into_bytes(), codeset: 5 },
                    "code" => Value::String { bytes: format!("c{i:<5}").into_bytes(), codeset: 5 },
                    "price" => Value::Double(i as f64 / 3.0),
                    "at" => Value::Datetime { jdn: 2_460_000 + i as i32, ms: 1000 * i as u32 },
                    "amount" => Value::Numeric { unscaled: i as i128 * 101, scale: 2 },
                    _ => Value::String { bytes: vec![0xE9, b'a' + i as u8 % 26], codeset: 3 },
                }
            };
            let values: Vec<Value> = rep.attributes.iter().map(|a| by_name(&a.name)).collect();
            let row = crate::testkit::encode::encode_row(rep, &values, None).unwrap();
            images.push(Image { rec_type: REC_HOME, row });
        }
        (catalog, class, images)
    }

    /// A row's JSON written from its bytes is the JSON of its decoded values, column by column
    /// in the user's order; decoding row after row into one row allocates nothing.
    #[test]
    fn rows_decode_to_the_json_of_their_values_without_allocating() {
        let (catalog, class, images) = typed_rows();
        let rep = &catalog.classes[&class].representations[&1];
        let name = rep.attributes.iter().position(|a| a.name == "name").unwrap();
        let zipped = |img: &&Image| match &row::layout::row_layout(rep, &img.row).unwrap().slots[name] {
            Slot::Bytes(r) => row::decode_varchar(&img.row[r.clone()]).unwrap().1,
            _ => false,
        };
        assert!(images.iter().filter(zipped).count() > 10, "rows with LZ4-compressed strings");
        let mut scratch = RowScratch::default();
        for (id, img) in images.iter().enumerate() {
            let values = row::decode_row(rep, &img.row).unwrap();
            let mut expected = String::from("{");
            for (n, &i) in rep.json_keys().order.iter().enumerate() {
                let a = &rep.attributes[i];
                expected += &format!(
                    "{}\"{}\":{}",
                    if n > 0 { "," } else { "" },
                    a.name,
                    row::text::value_json(&values[i], &a.domain)
                );
            }
            expected.push('}');
            let RowScratch { room, before, .. } = &mut scratch;
            catalog.decode_keyed_into(class, img, KeyMode::NameThen, None, room, before).unwrap();
            assert_eq!(before.json, expected);
            assert!(before.problems.is_empty());
            assert_eq!(before.key_json(), Some(format!("{{\"id\":{id}}}")));
            assert_eq!(*before, catalog.decode(class, img).unwrap());
        }
        let ((), allocations) = crate::alloc_count::allocations_in(|| {
            for _ in 0..4 {
                for img in &images {
                    let RowScratch { room, before, .. } = &mut scratch;
                    catalog.decode_keyed_into(class, img, KeyMode::NameThen, None, room, before).unwrap();
                }
            }
        });
        assert_eq!(allocations, 0, "decoding {} rows into one row's room", 4 * images.len());
        // A row with a string past the room kept is decoded, and its room given back.
        let (mut big, long) = (images[1].clone(), "\u{e9}".repeat(MAX_KEPT_TEXT));
        let values: Vec<row::Value> = rep
            .attributes
            .iter()
            .map(|a| match a.name.as_str() {
                "name" => row::Value::String { bytes: long.clone().into_bytes(), codeset: 5 },
                _ => row::decode_value(&a.domain, b"", 0),
            })
            .map(|v| if v.undecoded().is_some() { row::Value::Null } else { v })
            .collect();
        big.row = crate::testkit::encode::encode_row(rep, &values, None).unwrap();
        assert!(zipped(&&big), "the long string is LZ4-compressed in the row");
        let RowScratch { room, before, .. } = &mut scratch;
        catalog.decode_keyed_into(class, &big, KeyMode::NameThen, None, room, before).unwrap();
        assert!(before.json.contains(&long));
        assert_eq!(room.text.capacity(), 0);
    }

    /// Columns that do not decode are told in storage order, whatever the user's order.
    #[test]
    fn undecodable_columns_are_told_in_storage_order() {
        let (catalog, class, images) = typed_rows();
        let rep = &catalog.classes[&class].representations[&1];
        let mut img = images[3].clone();
        // Every variable column's offsets point past the row's end.
        let shape = row::layout::row_layout(rep, &img.row).unwrap();
        for j in 0..=rep.n_var {
            img.row[shape.header_size + j] = 0xF0;
        }
        let decoded = catalog.decode(class, &img).unwrap();
        let (_, values, problems) = catalog.decode_row(class, &img).unwrap();
        assert!(problems.len() >= 2, "{problems:?}");
        assert_eq!(decoded.problems, problems);
        assert_eq!(values.iter().filter(|v| v.undecoded().is_some()).count(), problems.len());
    }

    #[test]
    fn changed_columns_are_matched_by_attribute_id_in_any_order() {
        let before = row(&[(1, "id", "1"), (2, "na\"me", "\"a\""), (3, "n", "5")]);
        let after = row(&[(3, "n", "5"), (1, "id", "1"), (2, "na\"me", "\"b\""), (4, "new", "null")]);
        assert_eq!(changed_columns(&before, &after), vec!["na\"me".to_string(), "new".to_string()]);
        assert_eq!(changed_columns(&before, &before), Vec::<String>::new());
        assert_eq!(after.key_json().as_deref(), Some("{\"id\":1}"));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&after.json).unwrap()["na\"me"], "b");
    }
}
