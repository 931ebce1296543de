"""What PostgreSQL 15's pg_type holds of each built-in type beyond builtin_types: its
binary receive and send functions, typmod input and output functions, ANALYZE and
subscript functions ("-": none), alignment and storage.

One line per type: oid|typreceive|typsend|typmodin|typmodout|typanalyze|typsubscript|
typalign|typstorage. Copied from PostgreSQL 15 (the same on every server, no data of any
database); tests/proxy/test_type_functions.py compares them with a running one. Drivers
read typreceive to choose a type's decoder: ADBC's asks for the types that have one
(``typreceive != 0``) and reads arrays by ``array_recv``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_TYPE_FUNCTIONS = """\
16|boolrecv|boolsend|-|-|-|-|c|p
17|bytearecv|byteasend|-|-|-|-|i|x
18|charrecv|charsend|-|-|-|-|c|p
19|namerecv|namesend|-|-|-|raw_array_subscript_handler|c|p
20|int8recv|int8send|-|-|-|-|d|p
21|int2recv|int2send|-|-|-|-|s|p
22|int2vectorrecv|int2vectorsend|-|-|-|array_subscript_handler|i|p
23|int4recv|int4send|-|-|-|-|i|p
24|regprocrecv|regprocsend|-|-|-|-|i|p
25|textrecv|textsend|-|-|-|-|i|x
26|oidrecv|oidsend|-|-|-|-|i|p
27|tidrecv|tidsend|-|-|-|-|s|p
28|xidrecv|xidsend|-|-|-|-|i|p
29|cidrecv|cidsend|-|-|-|-|i|p
30|oidvectorrecv|oidvectorsend|-|-|-|array_subscript_handler|i|p
32|pg_ddl_command_recv|pg_ddl_command_send|-|-|-|-|d|p
114|json_recv|json_send|-|-|-|-|i|x
142|xml_recv|xml_send|-|-|-|-|i|x
143|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
194|pg_node_tree_recv|pg_node_tree_send|-|-|-|-|i|x
199|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
210|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
269|-|-|-|-|-|-|i|p
270|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
271|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
272|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
273|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
325|-|-|-|-|-|-|i|p
600|point_recv|point_send|-|-|-|raw_array_subscript_handler|d|p
601|lseg_recv|lseg_send|-|-|-|raw_array_subscript_handler|d|p
602|path_recv|path_send|-|-|-|-|d|x
603|box_recv|box_send|-|-|-|raw_array_subscript_handler|d|p
604|poly_recv|poly_send|-|-|-|-|d|x
628|line_recv|line_send|-|-|-|raw_array_subscript_handler|d|p
629|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
650|cidr_recv|cidr_send|-|-|-|-|i|m
651|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
700|float4recv|float4send|-|-|-|-|i|p
701|float8recv|float8send|-|-|-|-|d|p
705|unknownrecv|unknownsend|-|-|-|-|c|p
718|circle_recv|circle_send|-|-|-|-|d|p
719|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
774|macaddr8_recv|macaddr8_send|-|-|-|-|i|p
775|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
790|cash_recv|cash_send|-|-|-|-|d|p
791|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
829|macaddr_recv|macaddr_send|-|-|-|-|i|p
869|inet_recv|inet_send|-|-|-|-|i|m
1000|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1001|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1002|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1003|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1005|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1006|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1007|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1008|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1009|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1010|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1011|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1012|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1013|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1014|array_recv|array_send|bpchartypmodin|bpchartypmodout|array_typanalyze|array_subscript_handler|i|x
1015|array_recv|array_send|varchartypmodin|varchartypmodout|array_typanalyze|array_subscript_handler|i|x
1016|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1017|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1018|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1019|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1020|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1021|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1022|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1027|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
1028|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1033|-|-|-|-|-|-|i|p
1034|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1040|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1041|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1042|bpcharrecv|bpcharsend|bpchartypmodin|bpchartypmodout|-|-|i|x
1043|varcharrecv|varcharsend|varchartypmodin|varchartypmodout|-|-|i|x
1082|date_recv|date_send|-|-|-|-|i|p
1083|time_recv|time_send|timetypmodin|timetypmodout|-|-|d|p
1114|timestamp_recv|timestamp_send|timestamptypmodin|timestamptypmodout|-|-|d|p
1115|array_recv|array_send|timestamptypmodin|timestamptypmodout|array_typanalyze|array_subscript_handler|d|x
1182|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1183|array_recv|array_send|timetypmodin|timetypmodout|array_typanalyze|array_subscript_handler|d|x
1184|timestamptz_recv|timestamptz_send|timestamptztypmodin|timestamptztypmodout|-|-|d|p
1185|array_recv|array_send|timestamptztypmodin|timestamptztypmodout|array_typanalyze|array_subscript_handler|d|x
1186|interval_recv|interval_send|intervaltypmodin|intervaltypmodout|-|-|d|p
1187|array_recv|array_send|intervaltypmodin|intervaltypmodout|array_typanalyze|array_subscript_handler|d|x
1231|array_recv|array_send|numerictypmodin|numerictypmodout|array_typanalyze|array_subscript_handler|i|x
1263|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
1266|timetz_recv|timetz_send|timetztypmodin|timetztypmodout|-|-|d|p
1270|array_recv|array_send|timetztypmodin|timetztypmodout|array_typanalyze|array_subscript_handler|d|x
1560|bit_recv|bit_send|bittypmodin|bittypmodout|-|-|i|x
1561|array_recv|array_send|bittypmodin|bittypmodout|array_typanalyze|array_subscript_handler|i|x
1562|varbit_recv|varbit_send|varbittypmodin|varbittypmodout|-|-|i|x
1563|array_recv|array_send|varbittypmodin|varbittypmodout|array_typanalyze|array_subscript_handler|i|x
1700|numeric_recv|numeric_send|numerictypmodin|numerictypmodout|-|-|i|m
1790|textrecv|textsend|-|-|-|-|i|x
2201|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2202|regprocedurerecv|regproceduresend|-|-|-|-|i|p
2203|regoperrecv|regopersend|-|-|-|-|i|p
2204|regoperatorrecv|regoperatorsend|-|-|-|-|i|p
2205|regclassrecv|regclasssend|-|-|-|-|i|p
2206|regtyperecv|regtypesend|-|-|-|-|i|p
2207|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2208|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2209|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2210|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2211|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2249|record_recv|record_send|-|-|-|-|d|x
2275|cstring_recv|cstring_send|-|-|-|-|c|p
2276|-|-|-|-|-|-|i|p
2277|anyarray_recv|anyarray_send|-|-|-|-|d|x
2278|void_recv|void_send|-|-|-|-|i|p
2279|-|-|-|-|-|-|i|p
2280|-|-|-|-|-|-|i|p
2281|-|-|-|-|-|-|d|p
2283|-|-|-|-|-|-|i|p
2287|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
2776|-|-|-|-|-|-|i|p
2949|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
2950|uuid_recv|uuid_send|-|-|-|-|c|p
2951|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
2970|txid_snapshot_recv|txid_snapshot_send|-|-|-|-|d|x
3115|-|-|-|-|-|-|i|p
3220|pg_lsn_recv|pg_lsn_send|-|-|-|-|d|p
3221|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
3310|-|-|-|-|-|-|i|p
3361|pg_ndistinct_recv|pg_ndistinct_send|-|-|-|-|i|x
3402|pg_dependencies_recv|pg_dependencies_send|-|-|-|-|i|x
3500|-|-|-|-|-|-|i|p
3614|tsvectorrecv|tsvectorsend|-|-|ts_typanalyze|-|i|x
3615|tsqueryrecv|tsquerysend|-|-|-|-|i|p
3642|-|-|-|-|-|-|i|p
3643|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3644|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3645|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3734|regconfigrecv|regconfigsend|-|-|-|-|i|p
3735|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3769|regdictionaryrecv|regdictionarysend|-|-|-|-|i|p
3770|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3802|jsonb_recv|jsonb_send|-|-|-|jsonb_subscript_handler|i|x
3807|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3831|-|-|-|-|-|-|d|x
3838|-|-|-|-|-|-|i|p
3904|range_recv|range_send|-|-|range_typanalyze|-|i|x
3905|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3906|range_recv|range_send|-|-|range_typanalyze|-|i|x
3907|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3908|range_recv|range_send|-|-|range_typanalyze|-|d|x
3909|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
3910|range_recv|range_send|-|-|range_typanalyze|-|d|x
3911|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
3912|range_recv|range_send|-|-|range_typanalyze|-|i|x
3913|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
3926|range_recv|range_send|-|-|range_typanalyze|-|d|x
3927|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
4072|jsonpath_recv|jsonpath_send|-|-|-|-|i|x
4073|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
4089|regnamespacerecv|regnamespacesend|-|-|-|-|i|p
4090|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
4096|regrolerecv|regrolesend|-|-|-|-|i|p
4097|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
4191|regcollationrecv|regcollationsend|-|-|-|-|i|p
4192|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
4451|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|i|x
4532|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|i|x
4533|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|d|x
4534|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|d|x
4535|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|i|x
4536|multirange_recv|multirange_send|-|-|multirange_typanalyze|-|d|x
4537|-|-|-|-|-|-|d|x
4538|-|-|-|-|-|-|d|x
4600|brin_bloom_summary_recv|brin_bloom_summary_send|-|-|-|-|i|x
4601|brin_minmax_multi_summary_recv|brin_minmax_multi_summary_send|-|-|-|-|i|x
5017|pg_mcv_list_recv|pg_mcv_list_send|-|-|-|-|i|x
5038|pg_snapshot_recv|pg_snapshot_send|-|-|-|-|d|x
5039|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
5069|xid8recv|xid8send|-|-|-|-|d|p
5077|-|-|-|-|-|-|i|p
5078|anycompatiblearray_recv|anycompatiblearray_send|-|-|-|-|d|x
5079|-|-|-|-|-|-|i|p
5080|-|-|-|-|-|-|d|x
6150|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
6151|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
6152|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
6153|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
6155|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|i|x
6157|array_recv|array_send|-|-|array_typanalyze|array_subscript_handler|d|x
"""


@dataclass(frozen=True)
class TypeFunctions:
    receive: str
    send: str
    modin: str
    modout: str
    analyze: str
    subscript: str
    align: str
    storage: str


def _parse(text: str) -> dict[int, TypeFunctions]:
    functions: dict[int, TypeFunctions] = {}
    for line in text.strip().splitlines():
        oid, *fields = line.split("|")
        functions[int(oid)] = TypeFunctions(*fields)
    return functions


TYPE_FUNCTIONS: Mapping[int, TypeFunctions] = _parse(_TYPE_FUNCTIONS)
