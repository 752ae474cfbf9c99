-- protocol_version: the protocol the database speaks (no row = not migrated).
-- Params: none
select value from cairnq_meta where key = 'protocol_version';
