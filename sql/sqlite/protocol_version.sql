-- protocol_version: the protocol the database speaks (no row = not migrated).
-- Params: none
select m.value from cairnq_meta as m where m.key = 'protocol_version';
