-- inspect_meta: the cairnq_meta rows (protocol_version, schema_version). No params.
select key, value from cairnq_meta order by key;
