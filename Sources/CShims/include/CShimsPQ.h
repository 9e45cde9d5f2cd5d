#ifndef LIVEDELIVERY_CSHIMS_PQ_H
#define LIVEDELIVERY_CSHIMS_PQ_H
#include <libpq-fe.h>

// libpq's PG_DIAG_* field codes are char-literal macros ('C', 'M', …) that Swift does not import.
// Each is re-exported as a typed constant for PQresultErrorField.
extern const int CShims_pq_DIAG_SEVERITY_NONLOCALIZED;
extern const int CShims_pq_DIAG_SQLSTATE;
extern const int CShims_pq_DIAG_MESSAGE_PRIMARY;
extern const int CShims_pq_DIAG_MESSAGE_DETAIL;
extern const int CShims_pq_DIAG_MESSAGE_HINT;
extern const int CShims_pq_DIAG_SCHEMA_NAME;
extern const int CShims_pq_DIAG_TABLE_NAME;
extern const int CShims_pq_DIAG_COLUMN_NAME;
extern const int CShims_pq_DIAG_CONSTRAINT_NAME;

#endif
