"""The rows of PostgreSQL 15's pg_proc that the emulated catalog refers to: every function
pg_type names (typinput, typoutput, typreceive, typsend, typmodin, typmodout, typanalyze,
typsubscript), pg_am's handlers and pg_range's canonical and subdiff functions; with
their OIDs, names and namespace (pg_catalog), as every PostgreSQL 15 server has them (no
data of any database).

Npgsql 4 (Power BI) loads the types by ``JOIN pg_proc ON pg_proc.oid = a.typreceive``
and tells arrays by ``pg_proc.proname = 'array_recv'``: with pg_proc empty it found no
type. regproc_comparisons compares a regproc column with an OID as PostgreSQL does.

One line per function: oid|proname|proleakproof|proisstrict|provolatile|proparallel|
pronargs|prorettype|proargtypes[|prosrc when it is not proname]. Copied from PostgreSQL
15; tests/proxy/test_catalog_pg_proc.py compares them with a running one. Every such
function is a strict internal (prolang 12) function of cost 1, returning one value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_BUILTIN_PROCS = """\
3|heap_tableam_handler|f|t|v|s|1|269|2281
31|byteaout|f|t|i|s|1|2275|17
33|charout|f|t|i|s|1|2275|18
34|namein|f|t|i|s|1|19|2275
35|nameout|f|t|i|s|1|2275|19
38|int2in|f|t|i|s|1|21|2275
39|int2out|f|t|i|s|1|2275|21
40|int2vectorin|f|t|i|s|1|22|2275
41|int2vectorout|f|t|i|s|1|2275|22
42|int4in|f|t|i|s|1|23|2275
43|int4out|f|t|i|s|1|2275|23
44|regprocin|f|t|s|s|1|24|2275
45|regprocout|f|t|s|s|1|2275|24
46|textin|f|t|i|s|1|25|2275
47|textout|f|t|i|s|1|2275|25
48|tidin|f|t|i|s|1|27|2275
49|tidout|f|t|i|s|1|2275|27
50|xidin|f|t|i|s|1|28|2275
51|xidout|f|t|i|s|1|2275|28
52|cidin|f|t|i|s|1|29|2275
53|cidout|f|t|i|s|1|2275|29
54|oidvectorin|f|t|i|s|1|30|2275
55|oidvectorout|f|t|i|s|1|2275|30
86|pg_ddl_command_in|f|t|i|s|1|32|2275
87|pg_ddl_command_out|f|t|i|s|1|2275|32
88|pg_ddl_command_recv|f|t|i|s|1|32|2281
90|pg_ddl_command_send|f|t|i|s|1|17|32
109|unknownin|f|t|i|s|1|705|2275
110|unknownout|f|t|i|s|1|2275|705
117|point_in|f|t|i|s|1|600|2275
118|point_out|f|t|i|s|1|2275|600
119|lseg_in|f|t|i|s|1|601|2275
120|lseg_out|f|t|i|s|1|2275|601
121|path_in|f|t|i|s|1|602|2275
122|path_out|f|t|i|s|1|2275|602
123|box_in|f|t|i|s|1|603|2275
124|box_out|f|t|i|s|1|2275|603
195|pg_node_tree_in|f|t|i|s|1|194|2275
196|pg_node_tree_out|f|t|i|s|1|2275|194
197|pg_node_tree_recv|f|t|s|s|1|194|2281
198|pg_node_tree_send|f|t|s|s|1|17|194
200|float4in|f|t|i|s|1|700|2275
201|float4out|f|t|i|s|1|2275|700
214|float8in|f|t|i|s|1|701|2275
215|float8out|f|t|i|s|1|2275|701
267|table_am_handler_in|f|f|i|s|1|269|2275
268|table_am_handler_out|f|t|i|s|1|2275|269
321|json_in|f|t|i|s|1|114|2275
322|json_out|f|t|i|s|1|2275|114
323|json_recv|f|t|i|s|1|114|2281
324|json_send|f|t|i|s|1|17|114
326|index_am_handler_in|f|f|i|s|1|325|2275
327|index_am_handler_out|f|t|i|s|1|2275|325
330|bthandler|f|t|v|s|1|325|2281
331|hashhandler|f|t|v|s|1|325|2281
347|poly_in|f|t|i|s|1|604|2275
348|poly_out|f|t|i|s|1|2275|604
436|macaddr_in|f|t|i|s|1|829|2275
437|macaddr_out|f|t|i|s|1|2275|829
460|int8in|f|t|i|s|1|20|2275
461|int8out|f|t|i|s|1|2275|20
750|array_in|f|t|s|s|3|2277|2275 26 23
751|array_out|f|t|s|s|1|2275|2277
886|cash_in|f|t|s|s|1|790|2275
887|cash_out|f|t|s|s|1|2275|790
910|inet_in|f|t|i|s|1|869|2275
911|inet_out|f|t|i|s|1|2275|869
1031|aclitemin|f|t|s|s|1|1033|2275
1032|aclitemout|f|t|s|s|1|2275|1033
1044|bpcharin|f|t|i|s|3|1042|2275 26 23
1045|bpcharout|f|t|i|s|1|2275|1042
1046|varcharin|f|t|i|s|3|1043|2275 26 23
1047|varcharout|f|t|i|s|1|2275|1043
1084|date_in|f|t|s|s|1|1082|2275
1085|date_out|f|t|s|s|1|2275|1082
1143|time_in|f|t|s|s|3|1083|2275 26 23
1144|time_out|f|t|i|s|1|2275|1083
1150|timestamptz_in|f|t|s|s|3|1184|2275 26 23
1151|timestamptz_out|f|t|s|s|1|2275|1184
1160|interval_in|f|t|s|s|3|1186|2275 26 23
1161|interval_out|f|t|s|s|1|2275|1186
1242|boolin|f|t|i|s|1|16|2275
1243|boolout|f|t|i|s|1|2275|16
1244|byteain|f|t|i|s|1|17|2275
1245|charin|f|t|i|s|1|18|2275
1267|cidr_in|f|t|i|s|1|650|2275
1312|timestamp_in|f|t|s|s|3|1114|2275 26 23
1313|timestamp_out|f|t|s|s|1|2275|1114
1350|timetz_in|f|t|s|s|3|1266|2275 26 23
1351|timetz_out|f|t|i|s|1|2275|1266
1427|cidr_out|f|t|i|s|1|2275|650
1450|circle_in|f|t|i|s|1|718|2275
1451|circle_out|f|t|i|s|1|2275|718
1490|line_in|f|t|i|s|1|628|2275
1491|line_out|f|t|i|s|1|2275|628
1564|bit_in|f|t|i|s|3|1560|2275 26 23
1565|bit_out|f|t|i|s|1|2275|1560
1579|varbit_in|f|t|i|s|3|1562|2275 26 23
1580|varbit_out|f|t|i|s|1|2275|1562
1701|numeric_in|f|t|i|s|3|1700|2275 26 23
1702|numeric_out|f|t|i|s|1|2275|1700
1798|oidin|f|t|i|s|1|26|2275
1799|oidout|f|t|i|s|1|2275|26
2212|regprocedurein|f|t|s|s|1|2202|2275
2213|regprocedureout|f|t|s|s|1|2275|2202
2214|regoperin|f|t|s|s|1|2203|2275
2215|regoperout|f|t|s|s|1|2275|2203
2216|regoperatorin|f|t|s|s|1|2204|2275
2217|regoperatorout|f|t|s|s|1|2275|2204
2218|regclassin|f|t|s|s|1|2205|2275
2219|regclassout|f|t|s|s|1|2275|2205
2220|regtypein|f|t|s|s|1|2206|2275
2221|regtypeout|f|t|s|s|1|2275|2206
2290|record_in|f|t|s|s|3|2249|2275 26 23
2291|record_out|f|t|s|s|1|2275|2249
2292|cstring_in|f|t|i|s|1|2275|2275
2293|cstring_out|f|t|i|s|1|2275|2275
2294|any_in|f|t|i|s|1|2276|2275
2295|any_out|f|t|i|s|1|2275|2276
2296|anyarray_in|f|t|i|s|1|2277|2275
2297|anyarray_out|f|t|s|s|1|2275|2277
2298|void_in|f|t|i|s|1|2278|2275
2299|void_out|f|t|i|s|1|2275|2278
2300|trigger_in|f|f|i|s|1|2279|2275
2301|trigger_out|f|t|i|s|1|2275|2279
2302|language_handler_in|f|f|i|s|1|2280|2275
2303|language_handler_out|f|t|i|s|1|2275|2280
2304|internal_in|f|f|i|s|1|2281|2275
2305|internal_out|f|t|i|s|1|2275|2281
2312|anyelement_in|f|t|i|s|1|2283|2275
2313|anyelement_out|f|t|i|s|1|2275|2283
2400|array_recv|f|t|s|s|3|2277|2281 26 23
2401|array_send|f|t|s|s|1|17|2277
2402|record_recv|f|t|s|s|3|2249|2281 26 23
2403|record_send|f|t|s|s|1|17|2249
2404|int2recv|f|t|i|s|1|21|2281
2405|int2send|f|t|i|s|1|17|21
2406|int4recv|f|t|i|s|1|23|2281
2407|int4send|f|t|i|s|1|17|23
2408|int8recv|f|t|i|s|1|20|2281
2409|int8send|f|t|i|s|1|17|20
2410|int2vectorrecv|f|t|i|s|1|22|2281
2411|int2vectorsend|f|t|i|s|1|17|22
2412|bytearecv|f|t|i|s|1|17|2281
2413|byteasend|f|t|i|s|1|17|17
2414|textrecv|f|t|s|s|1|25|2281
2415|textsend|f|t|s|s|1|17|25
2416|unknownrecv|f|t|i|s|1|705|2281
2417|unknownsend|f|t|i|s|1|17|705
2418|oidrecv|f|t|i|s|1|26|2281
2419|oidsend|f|t|i|s|1|17|26
2420|oidvectorrecv|f|t|i|s|1|30|2281
2421|oidvectorsend|f|t|i|s|1|17|30
2422|namerecv|f|t|s|s|1|19|2281
2423|namesend|f|t|s|s|1|17|19
2424|float4recv|f|t|i|s|1|700|2281
2425|float4send|f|t|i|s|1|17|700
2426|float8recv|f|t|i|s|1|701|2281
2427|float8send|f|t|i|s|1|17|701
2428|point_recv|f|t|i|s|1|600|2281
2429|point_send|f|t|i|s|1|17|600
2430|bpcharrecv|f|t|s|s|3|1042|2281 26 23
2431|bpcharsend|f|t|s|s|1|17|1042
2432|varcharrecv|f|t|s|s|3|1043|2281 26 23
2433|varcharsend|f|t|s|s|1|17|1043
2434|charrecv|f|t|i|s|1|18|2281
2435|charsend|f|t|i|s|1|17|18
2436|boolrecv|f|t|i|s|1|16|2281
2437|boolsend|f|t|i|s|1|17|16
2438|tidrecv|f|t|i|s|1|27|2281
2439|tidsend|f|t|i|s|1|17|27
2440|xidrecv|f|t|i|s|1|28|2281
2441|xidsend|f|t|i|s|1|17|28
2442|cidrecv|f|t|i|s|1|29|2281
2443|cidsend|f|t|i|s|1|17|29
2444|regprocrecv|f|t|i|s|1|24|2281
2445|regprocsend|f|t|i|s|1|17|24
2446|regprocedurerecv|f|t|i|s|1|2202|2281
2447|regproceduresend|f|t|i|s|1|17|2202
2448|regoperrecv|f|t|i|s|1|2203|2281
2449|regopersend|f|t|i|s|1|17|2203
2450|regoperatorrecv|f|t|i|s|1|2204|2281
2451|regoperatorsend|f|t|i|s|1|17|2204
2452|regclassrecv|f|t|i|s|1|2205|2281
2453|regclasssend|f|t|i|s|1|17|2205
2454|regtyperecv|f|t|i|s|1|2206|2281
2455|regtypesend|f|t|i|s|1|17|2206
2456|bit_recv|f|t|i|s|3|1560|2281 26 23
2457|bit_send|f|t|i|s|1|17|1560
2458|varbit_recv|f|t|i|s|3|1562|2281 26 23
2459|varbit_send|f|t|i|s|1|17|1562
2460|numeric_recv|f|t|i|s|3|1700|2281 26 23
2461|numeric_send|f|t|i|s|1|17|1700
2468|date_recv|f|t|i|s|1|1082|2281
2469|date_send|f|t|i|s|1|17|1082
2470|time_recv|f|t|i|s|3|1083|2281 26 23
2471|time_send|f|t|i|s|1|17|1083
2472|timetz_recv|f|t|i|s|3|1266|2281 26 23
2473|timetz_send|f|t|i|s|1|17|1266
2474|timestamp_recv|f|t|i|s|3|1114|2281 26 23
2475|timestamp_send|f|t|i|s|1|17|1114
2476|timestamptz_recv|f|t|i|s|3|1184|2281 26 23
2477|timestamptz_send|f|t|i|s|1|17|1184
2478|interval_recv|f|t|i|s|3|1186|2281 26 23
2479|interval_send|f|t|i|s|1|17|1186
2480|lseg_recv|f|t|i|s|1|601|2281
2481|lseg_send|f|t|i|s|1|17|601
2482|path_recv|f|t|i|s|1|602|2281
2483|path_send|f|t|i|s|1|17|602
2484|box_recv|f|t|i|s|1|603|2281
2485|box_send|f|t|i|s|1|17|603
2486|poly_recv|f|t|i|s|1|604|2281
2487|poly_send|f|t|i|s|1|17|604
2488|line_recv|f|t|i|s|1|628|2281
2489|line_send|f|t|i|s|1|17|628
2490|circle_recv|f|t|i|s|1|718|2281
2491|circle_send|f|t|i|s|1|17|718
2492|cash_recv|f|t|i|s|1|790|2281
2493|cash_send|f|t|i|s|1|17|790
2494|macaddr_recv|f|t|i|s|1|829|2281
2495|macaddr_send|f|t|i|s|1|17|829
2496|inet_recv|f|t|i|s|1|869|2281
2497|inet_send|f|t|i|s|1|17|869
2498|cidr_recv|f|t|i|s|1|650|2281
2499|cidr_send|f|t|i|s|1|17|650
2500|cstring_recv|f|t|s|s|1|2275|2281
2501|cstring_send|f|t|s|s|1|17|2275
2502|anyarray_recv|f|t|s|s|1|2277|2281
2503|anyarray_send|f|t|s|s|1|17|2277
2777|anynonarray_in|f|t|i|s|1|2776|2275
2778|anynonarray_out|f|t|i|s|1|2275|2776
2893|xml_in|f|t|s|s|1|142|2275
2894|xml_out|f|t|i|s|1|2275|142
2898|xml_recv|f|t|s|s|1|142|2281
2899|xml_send|f|t|s|s|1|17|142
2902|varbittypmodin|f|t|i|s|1|23|1263
2903|intervaltypmodin|f|t|i|s|1|23|1263
2904|intervaltypmodout|f|t|i|s|1|2275|23
2905|timestamptypmodin|f|t|i|s|1|23|1263
2906|timestamptypmodout|f|t|i|s|1|2275|23
2907|timestamptztypmodin|f|t|i|s|1|23|1263
2908|timestamptztypmodout|f|t|i|s|1|2275|23
2909|timetypmodin|f|t|i|s|1|23|1263
2910|timetypmodout|f|t|i|s|1|2275|23
2911|timetztypmodin|f|t|i|s|1|23|1263
2912|timetztypmodout|f|t|i|s|1|2275|23
2913|bpchartypmodin|f|t|i|s|1|23|1263
2914|bpchartypmodout|f|t|i|s|1|2275|23
2915|varchartypmodin|f|t|i|s|1|23|1263
2916|varchartypmodout|f|t|i|s|1|2275|23
2917|numerictypmodin|f|t|i|s|1|23|1263
2918|numerictypmodout|f|t|i|s|1|2275|23
2919|bittypmodin|f|t|i|s|1|23|1263
2920|bittypmodout|f|t|i|s|1|2275|23
2921|varbittypmodout|f|t|i|s|1|2275|23
2939|txid_snapshot_in|f|t|i|s|1|2970|2275|pg_snapshot_in
2940|txid_snapshot_out|f|t|i|s|1|2275|2970|pg_snapshot_out
2941|txid_snapshot_recv|f|t|i|s|1|2970|2281|pg_snapshot_recv
2942|txid_snapshot_send|f|t|i|s|1|17|2970|pg_snapshot_send
2952|uuid_in|f|t|i|s|1|2950|2275
2953|uuid_out|f|t|i|s|1|2275|2950
2961|uuid_recv|f|t|i|s|1|2950|2281
2962|uuid_send|f|t|i|s|1|17|2950
3116|fdw_handler_in|f|f|i|s|1|3115|2275
3117|fdw_handler_out|f|t|i|s|1|2275|3115
3120|void_recv|f|t|i|s|1|2278|2281
3121|void_send|f|t|i|s|1|17|2278
3229|pg_lsn_in|f|t|i|s|1|3220|2275
3230|pg_lsn_out|f|t|i|s|1|2275|3220
3238|pg_lsn_recv|f|t|i|s|1|3220|2281
3239|pg_lsn_send|f|t|i|s|1|17|3220
3311|tsm_handler_in|f|f|i|s|1|3310|2275
3312|tsm_handler_out|f|t|i|s|1|2275|3310
3355|pg_ndistinct_in|f|t|i|s|1|3361|2275
3356|pg_ndistinct_out|f|t|i|s|1|2275|3361
3357|pg_ndistinct_recv|f|t|s|s|1|3361|2281
3358|pg_ndistinct_send|f|t|s|s|1|17|3361
3404|pg_dependencies_in|f|t|i|s|1|3402|2275
3405|pg_dependencies_out|f|t|i|s|1|2275|3402
3406|pg_dependencies_recv|f|t|s|s|1|3402|2281
3407|pg_dependencies_send|f|t|s|s|1|17|3402
3446|macaddr8_recv|f|t|i|s|1|774|2281
3447|macaddr8_send|f|t|i|s|1|17|774
3504|anyenum_in|f|t|i|s|1|3500|2275
3505|anyenum_out|f|t|s|s|1|2275|3500
3594|event_trigger_in|f|f|i|s|1|3838|2275
3595|event_trigger_out|f|t|i|s|1|2275|3838
3610|tsvectorin|f|t|i|s|1|3614|2275
3611|tsvectorout|f|t|i|s|1|2275|3614
3612|tsqueryin|f|t|i|s|1|3615|2275
3613|tsqueryout|f|t|i|s|1|2275|3615
3638|tsvectorsend|f|t|i|s|1|17|3614
3639|tsvectorrecv|f|t|i|s|1|3614|2281
3640|tsquerysend|f|t|i|s|1|17|3615
3641|tsqueryrecv|f|t|i|s|1|3615|2281
3646|gtsvectorin|f|t|i|s|1|3642|2275
3647|gtsvectorout|f|t|i|s|1|2275|3642
3688|ts_typanalyze|f|t|s|s|1|16|2281
3736|regconfigin|f|t|s|s|1|3734|2275
3737|regconfigout|f|t|s|s|1|2275|3734
3738|regconfigrecv|f|t|i|s|1|3734|2281
3739|regconfigsend|f|t|i|s|1|17|3734
3771|regdictionaryin|f|t|s|s|1|3769|2275
3772|regdictionaryout|f|t|s|s|1|2275|3769
3773|regdictionaryrecv|f|t|i|s|1|3769|2281
3774|regdictionarysend|f|t|i|s|1|17|3769
3803|jsonb_send|f|t|i|s|1|17|3802
3804|jsonb_out|f|t|i|s|1|2275|3802
3805|jsonb_recv|f|t|i|s|1|3802|2281
3806|jsonb_in|f|t|i|s|1|3802|2275
3816|array_typanalyze|f|t|s|s|1|16|2281
3832|anyrange_in|f|t|s|s|3|3831|2275 26 23
3833|anyrange_out|f|t|s|s|1|2275|3831
3834|range_in|f|t|s|s|3|3831|2275 26 23
3835|range_out|f|t|s|s|1|2275|3831
3836|range_recv|f|t|s|s|3|3831|2281 26 23
3837|range_send|f|t|s|s|1|17|3831
3914|int4range_canonical|f|t|i|s|1|3904|3904
3915|daterange_canonical|f|t|i|s|1|3912|3912
3916|range_typanalyze|f|t|s|s|1|16|2281
3922|int4range_subdiff|f|t|i|s|2|701|23 23
3923|int8range_subdiff|f|t|i|s|2|701|20 20
3924|numrange_subdiff|f|t|i|s|2|701|1700 1700
3925|daterange_subdiff|f|t|i|s|2|701|1082 1082
3928|int8range_canonical|f|t|i|s|1|3926|3926
3929|tsrange_subdiff|f|t|i|s|2|701|1114 1114
3930|tstzrange_subdiff|f|t|i|s|2|701|1184 1184
4001|jsonpath_in|f|t|i|s|1|4072|2275
4002|jsonpath_recv|f|t|i|s|1|4072|2281
4003|jsonpath_out|f|t|i|s|1|2275|4072
4004|jsonpath_send|f|t|i|s|1|17|4072
4084|regnamespacein|f|t|s|s|1|4089|2275
4085|regnamespaceout|f|t|s|s|1|2275|4089
4087|regnamespacerecv|f|t|i|s|1|4089|2281
4088|regnamespacesend|f|t|i|s|1|17|4089
4092|regroleout|f|t|s|s|1|2275|4096
4094|regrolerecv|f|t|i|s|1|4096|2281
4095|regrolesend|f|t|i|s|1|17|4096
4098|regrolein|f|t|s|s|1|4096|2275
4110|macaddr8_in|f|t|i|s|1|774|2275
4111|macaddr8_out|f|t|i|s|1|2275|774
4193|regcollationin|f|t|s|s|1|4191|2275
4194|regcollationout|f|t|s|s|1|2275|4191
4196|regcollationrecv|f|t|i|s|1|4191|2281
4197|regcollationsend|f|t|i|s|1|17|4191
4226|anycompatiblemultirange_in|f|t|s|s|3|4538|2275 26 23
4227|anycompatiblemultirange_out|f|t|s|s|1|2275|4538
4229|anymultirange_in|f|t|s|s|3|4537|2275 26 23
4230|anymultirange_out|f|t|s|s|1|2275|4537
4231|multirange_in|f|t|s|s|3|4537|2275 26 23
4232|multirange_out|f|t|s|s|1|2275|4537
4233|multirange_recv|f|t|s|s|3|4537|2281 26 23
4234|multirange_send|f|t|s|s|1|17|4537
4242|multirange_typanalyze|f|t|s|s|1|16|2281
4596|brin_bloom_summary_in|f|t|i|s|1|4600|2275
4597|brin_bloom_summary_out|f|t|i|s|1|2275|4600
4598|brin_bloom_summary_recv|f|t|s|s|1|4600|2281
4599|brin_bloom_summary_send|f|t|s|s|1|17|4600
4638|brin_minmax_multi_summary_in|f|t|i|s|1|4601|2275
4639|brin_minmax_multi_summary_out|f|t|i|s|1|2275|4601
4640|brin_minmax_multi_summary_recv|f|t|s|s|1|4601|2281
4641|brin_minmax_multi_summary_send|f|t|s|s|1|17|4601
5018|pg_mcv_list_in|f|t|i|s|1|5017|2275
5019|pg_mcv_list_out|f|t|i|s|1|2275|5017
5020|pg_mcv_list_recv|f|t|s|s|1|5017|2281
5021|pg_mcv_list_send|f|t|s|s|1|17|5017
5055|pg_snapshot_in|f|t|i|s|1|5038|2275
5056|pg_snapshot_out|f|t|i|s|1|2275|5038
5057|pg_snapshot_recv|f|t|i|s|1|5038|2281
5058|pg_snapshot_send|f|t|i|s|1|17|5038
5070|xid8in|f|t|i|s|1|5069|2275
5081|xid8out|f|t|i|s|1|2275|5069
5082|xid8recv|f|t|i|s|1|5069|2281
5083|xid8send|f|t|i|s|1|17|5069
5086|anycompatible_in|f|t|i|s|1|5077|2275
5087|anycompatible_out|f|t|i|s|1|2275|5077
5088|anycompatiblearray_in|f|t|i|s|1|5078|2275
5089|anycompatiblearray_out|f|t|s|s|1|2275|5078
5090|anycompatiblearray_recv|f|t|s|s|1|5078|2281
5091|anycompatiblearray_send|f|t|s|s|1|17|5078
5092|anycompatiblenonarray_in|f|t|i|s|1|5079|2275
5093|anycompatiblenonarray_out|f|t|i|s|1|2275|5079
5094|anycompatiblerange_in|f|t|s|s|3|5080|2275 26 23
5095|anycompatiblerange_out|f|t|s|s|1|2275|5080
6098|jsonb_subscript_handler|f|t|i|s|1|2281|2281
6179|array_subscript_handler|f|t|i|s|1|2281|2281
6180|raw_array_subscript_handler|f|t|i|s|1|2281|2281
"""


@dataclass(frozen=True)
class BuiltinProc:
    oid: int
    name: str
    leakproof: bool
    strict: bool
    volatility: str
    parallel: str
    argument_count: int
    result_type: int
    argument_types: tuple[int, ...]
    source: str


def _parse(text: str) -> dict[int, BuiltinProc]:
    procs: dict[int, BuiltinProc] = {}
    for line in text.strip().splitlines():
        oid, name, leakproof, strict, volatility, parallel, count, result, args, *source = (
            line.split("|")
        )
        procs[int(oid)] = BuiltinProc(
            oid=int(oid),
            name=name,
            leakproof=leakproof == "t",
            strict=strict == "t",
            volatility=volatility,
            parallel=parallel,
            argument_count=int(count),
            result_type=int(result),
            argument_types=tuple(int(a) for a in args.split()),
            source=source[0] if source else name,
        )
    return procs


BUILTIN_PROCS: Mapping[int, BuiltinProc] = _parse(_BUILTIN_PROCS)
