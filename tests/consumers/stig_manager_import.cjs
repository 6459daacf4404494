// Reads checklist files with STIG Manager's own import parsers (@nuwcdivnpt/stig-manager-client-modules,
// the module STIG Manager's web client and STIGMan Watcher import with) and prints, as JSON, what
// STIG Manager would import from each: the asset, and per checklist the benchmark id, revision and
// every review's rule id and result. A parser's error is printed as {"error": ...} for that file.
//
// node stig_manager_import.cjs MODULES_DIR ckl|cklb|xccdf FILE...
'use strict'
const fs = require('fs')
const path = require('path')

const [modulesDir, format, ...files] = process.argv.slice(2)
const lib = require(path.join(modulesDir, '@nuwcdivnpt/stig-manager-client-modules'))
const parse = { ckl: lib.reviewsFromCkl, cklb: lib.reviewsFromCklb, xccdf: lib.reviewsFromXccdf }[format]
if (!parse) throw new Error(`unknown format ${format}`)

// STIG Manager's defaults for a collection (its API's collection settings).
const importOptions = {
  autoStatus: { fail: 'submitted', notapplicable: 'submitted', pass: 'submitted' },
  unreviewed: 'always',
  unreviewedCommented: 'informational',
  emptyDetail: 'replace',
  emptyComment: 'ignore',
  allowCustom: true
}
const fieldSettings = {
  detail: { enabled: 'always', required: 'findings' },
  comment: { enabled: 'findings', required: 'findings' }
}

const out = []
for (const file of files) {
  try {
    const r = parse({
      data: fs.readFileSync(file, 'utf8'),
      importOptions,
      fieldSettings,
      allowAccept: true,
      scapBenchmarkMap: new Map(),
      sourceRef: file
    })
    out.push({
      file,
      target: r.target.name,
      checklists: r.checklists.map(c => ({
        benchmarkId: c.benchmarkId,
        revisionStr: c.revisionStr,
        reviews: c.reviews.map(v => ({ ruleId: v.ruleId, result: v.result, status: v.status?.label ?? v.status ?? null,
                                       detail: v.detail ?? null, comment: v.comment ?? null }))
      }))
    })
  } catch (e) {
    out.push({ file, error: String(e && e.message || e) })
  }
}
process.stdout.write(JSON.stringify(out))
