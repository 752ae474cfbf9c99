-- protocol_version: the protocol the database speaks; no row means an unmigrated
-- database (read as 0 by the caller). No params.
select value from cairnq_meta where key = 'protocol_version'
