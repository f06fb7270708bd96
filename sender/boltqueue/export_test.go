package boltqueue

// HistoryScan is historyScan, for the tests of its bound.
const HistoryScan = historyScan
