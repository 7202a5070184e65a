"""git's options, per subcommand, as git 2.4x documents them (``git <cmd> -h``, git-log(1), git-diff(1)).

Every ``--x`` of git's parse-options also reads as ``--no-x`` (``negatable``). A subcommand with no table
here takes no option without asking; the risky options are the ones that throw work away (``stash -u``
takes untracked files out of the tree, ``checkout --no-overlay`` deletes what the source lacks, ``switch
--discard-changes``...), delete the records that recover it (``reflog expire``, ``gc --prune``) or write
outside the work tree (``apply --unsafe-paths``). What a subcommand deletes by its operands (``git rm``,
``git clean``) is the rule's (git.py).
"""

from __future__ import annotations

import dataclasses

from tools.shell.options import Spec
from tools.shell.options import spec as S

_REV = (
    "follow decorate?= no-decorate decorate-refs= decorate-refs-exclude= clear-decorations source mailmap "
    "use-mailmap full-diff log-size since= after= since-as-filter= until= before= author= committer= grep-reflog= "
    "grep= all-match invert-grep regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp "
    "remove-empty merges no-merges min-parents= max-parents= first-parent exclude-first-parent-only not all "
    "branches?= tags?= remotes?= glob= exclude= exclude-hidden= reflog alternate-refs single-worktree "
    "ignore-missing bisect stdin cherry-mark cherry-pick left-only right-only cherry walk-reflogs merge boundary "
    "simplify-by-decoration show-pulls full-history dense sparse simplify-merges ancestry-path?= parents "
    "date-order author-date-order topo-order reverse no-walk?= do-walk pretty?= format= abbrev-commit oneline "
    "encoding= expand-tabs?= notes?= show-notes?= standard-notes show-signature relative-date date= children "
    "left-right graph show-linear-break?= max-count= skip= max-age= min-age= count in-commit-order")
_DIFF = (
    "patch no-patch diff-merges= combined-all-paths unified= >output= output-indicator-new= output-indicator-old= "
    "output-indicator-context= raw patch-with-raw indent-heuristic minimal patience histogram anchored= "
    "diff-algorithm= stat?= stat-width= stat-name-width= stat-graph-width= stat-count= compact-summary numstat "
    "shortstat dirstat?= cumulative dirstat-by-file?= summary patch-with-stat name-only name-status submodule?= "
    "color?= color-moved?= color-moved-ws= word-diff?= word-diff-regex= color-words?= renames rename-empty check "
    "ws-error-highlight= full-index binary abbrev?= break-rewrites?= find-renames?= find-copies?= "
    "find-copies-harder irreversible-delete diff-filter= find-object= pickaxe-all pickaxe-regex skip-to= "
    "rotate-to= relative?= text ignore-cr-at-eol ignore-space-at-eol ignore-space-change ignore-all-space "
    "ignore-blank-lines ignore-matching-lines= inter-hunk-context= function-context ext-diff textconv "
    "ignore-submodules?= src-prefix= dst-prefix= prefix default-prefix line-prefix= ita-invisible-in-index "
    "ita-visible-in-index base ours theirs cc remerge-diff dd")
_DIFF_SHORT = "pusztRabwWDcm0123 U: X:: B:: M:: C:: l: S: G: O: I:"
_LOG = S("giEFPL " + _DIFF_SHORT + " n: L:", _REV + " " + _DIFF, numbers=True)
_MERGE = ("commit edit cleanup= ff ff-only log?= signoff stat squash verify strategy= strategy-option= "
          "verify-signatures summary quiet verbose progress autostash allow-unrelated-histories rerere-autoupdate "
          "overwrite-ignore gpg-sign?=")
_FETCH = ("all append atomic depth= deepen= shallow-since= shallow-exclude= unshallow update-shallow "
          "negotiation-tip= negotiate-only dry-run porcelain write-fetch-head force keep multiple auto-maintenance "
          "auto-gc write-commit-graph prefetch prune prune-tags tags recurse-submodules?= jobs= set-upstream "
          "submodule-prefix= recurse-submodules-default= update-head-ok *upload-pack= quiet verbose progress "
          "server-option= show-forced-updates ipv4 ipv6 stdin filter= refmap= refetch")
_PICK = ("edit cleanup= mainline= no-commit signoff gpg-sign?= ff allow-empty allow-empty-message "
         "keep-redundant-commits empty= strategy= strategy-option= rerere-autoupdate continue skip quit abort "
         "reference")
_PATHSPEC = " pathspec-from-file= pathspec-file-nul"
_DISCARD = "throws away uncommitted changes"

GIT_GLOBAL = S("pPv *C: *c:", "paginate no-pager no-replace-objects literal-pathspecs glob-pathspecs "
               "noglob-pathspecs icase-pathspecs no-optional-locks bare *git-dir= *work-tree= namespace= "
               "*exec-path?= *config-env= *super-prefix= html-path man-path info-path *list-cmds= *attr-source= "
               "help version")

_TABLES: dict[str, Spec] = {
    "add": S("nvfipuANqe", "dry-run verbose force interactive patch edit update all ignore-removal intent-to-add "
             "refresh ignore-errors ignore-missing renormalize chmod= sparse warn-embedded-repo" + _PATHSPEC),
    "commit": S("aqsvnepizo S:: *F: m: c: C: *t: u::",
                "all patch reuse-message= reedit-message= fixup= squash= reset-author short branch porcelain long "
                "null *file= author= date= message= *template= signoff trailer= verify allow-empty "
                "allow-empty-message cleanup= edit amend post-rewrite include only untracked-files?= verbose quiet "
                "dry-run status gpg-sign?= interactive" + _PATHSPEC),
    "log": _LOG, "show": _LOG, "whatchanged": _LOG, "rev-list": _LOG,
    "shortlog": S("nsecw::", _REV + " numbered summary email committer group= format="),
    "diff": S(_DIFF_SHORT, _DIFF + " cached staged merge-base no-index exit-code quiet", numbers=True),
    "diff-tree": S("rtmscvz " + _DIFF_SHORT, _DIFF + " root merge-base stdin no-commit-id always pretty?= "
                   "format= encoding= abbrev-commit oneline"),
    "diff-index": S(_DIFF_SHORT, _DIFF + " cached merge-base exit-code quiet"),
    "diff-files": S("qc " + _DIFF_SHORT, _DIFF + " exit-code quiet base ours theirs"),
    "range-diff": S(_DIFF_SHORT, _DIFF + " creation-factor= no-dual-color left-only right-only notes?="),
    "status": S("sbvz u:: M::", "short branch show-stash porcelain?= long verbose untracked-files?= "
                "ignored?= ignore-submodules?= null column?= ahead-behind renames find-renames?="),
    "branch": S("vqdrRaliftcmMD u:", "verbose quiet delete force move copy remotes all list track?= "
                "set-upstream-to= unset-upstream show-current contains?= merged?= points-at= sort= format= "
                "column?= color?= create-reflog abbrev?= ignore-case omit-empty recurse-submodules"),
    "checkout": S("qflmpt b: *B:", "quiet force merge detach track?= orphan= ours theirs conflict= "
                  "overwrite-ignore ignore-other-worktrees recurse-submodules progress guess overlay patch"
                  + _PATHSPEC,
                  risky={"-B": "resets a branch to another commit", "--no-overlay": "deletes files the source "
                                                                                     "does not have"}),
    "switch": S("dmqt c: o:", "create= detach guess merge conflict= quiet progress track?= orphan= "
                "ignore-other-worktrees recurse-submodules",
                risky={"-f": _DISCARD, "--force": _DISCARD, "--discard-changes": _DISCARD,
                       "-C": "resets a branch to another commit", "--force-create": "resets a branch to another "
                                                                                    "commit"}),
    "restore": S("SWpqm s:", "source= staged worktree patch quiet merge ours theirs conflict= ignore-unmerged "
                 "ignore-skip-worktree-bits recurse-submodules overlay progress" + _PATHSPEC),
    "reset": S("qpN", "soft mixed hard merge keep quiet patch intent-to-add recurse-submodules refresh"
               + _PATHSPEC),
    "stash": S("pkqSuaem:", "patch keep-index quiet staged include-untracked all message= index only-untracked"
               + _PATHSPEC + " " + _DIFF),
    "rm": S("nqrf", "cached dry-run quiet force ignore-unmatch sparse" + _PATHSPEC),
    "mv": S("kvn", "dry-run verbose sparse", risky={"-f": "overwrites the destination",
                                                    "--force": "overwrites the destination"}),
    "clean": S("dfinqxXe:", "dry-run force interactive quiet exclude="),
    "fetch": S("aqvfkmnpPtuj: o: 46", _FETCH),
    "pull": S("aqvfkmnpPtuj: o: 46rs: X: S:: e", _FETCH + " " + _MERGE + " rebase?="),
    "push": S("dfnquv46 o:", "all branches mirror tags follow-tags atomic dry-run porcelain delete prune force "
              "force-with-lease?= force-if-includes repo= set-upstream thin *receive-pack= *exec= verify "
              "recurse-submodules= signed?= push-option= ipv4 ipv6 quiet verbose progress"),
    "remote": S("vtmfnp", "verbose tags mirror?= push add delete dry-run prune"),
    "tag": S("adsfvlieF: m: u: n::", "annotate delete sign local-user= force verify list contains?= merged?= "
             "points-at= sort= format= column?= color?= create-reflog cleanup= ignore-case omit-empty trailer= "
             "message= *file= edit"),
    "config": S("lz *f:", "global system local worktree *file= blob= get get-all get-regexp get-urlmatch replace-all "
                "add unset unset-all rename-section remove-section list fixed-value get-color get-colorbool type= bool "
                "int bool-or-int bool-or-str path expiry-date null name-only includes show-origin show-scope default= "
                "comment= value= all url=",
                risky={"-e": "opens the configuration in an editor", "--edit": "opens the configuration in an editor"}),
    "rev-parse": S("q", "abbrev-ref?= all branches?= tags?= remotes?= glob= exclude= exclude-hidden= "
                   "disambiguate= git-dir git-common-dir absolute-git-dir is-inside-git-dir is-inside-work-tree "
                   "is-bare-repository is-shallow-repository local-env-vars resolve-git-dir= git-path= show-cdup "
                   "show-prefix show-toplevel show-superproject-working-tree shared-index-path "
                   "show-object-format?= show-ref-format since= after= until= before= verify quiet sq sq-quote "
                   "short?= symbolic symbolic-full-name not default= prefix= revs-only revs flags parseopt "
                   "keep-dashdash stop-at-non-option stuck-long path-format="),
    "ls-files": S("cdmokstuvfiz x: X:", "cached deleted modified others ignored stage unmerged killed exclude= "
                  "exclude-from= exclude-per-directory= exclude-standard directory empty-directory error-unmatch "
                  "with-tree= full-name recurse-submodules abbrev?= debug deduplicate eol sparse format= "
                  "resolve-undo"),
    "ls-tree": S("dlrtz", "long name-only name-status object-only full-name full-tree format= abbrev?="),
    "ls-remote": S("qht", "quiet *upload-pack= *exec= tags heads refs get-url sort= exit-code symref "
                   "server-option="),
    "blame": S("bclnpsteftw L: S: M:: C::", "incremental root show-stats progress score-debug show-name "
               "show-number porcelain line-porcelain contents= date= encoding= reverse= first-parent ignore-rev= "
               "ignore-revs-file= color-lines color-by-age minimal abbrev?= show-email"),
    "annotate": S("bclnpsteftw L: S: M:: C::", "incremental root show-stats progress porcelain contents= date= "
                  "encoding= reverse= first-parent ignore-rev= ignore-revs-file= minimal abbrev?= show-email"),
    "grep": S("aiIrwvhHEGPFnlLOzocpqWfAe: f: m: A: B: C: O::", "cached untracked index exclude-standard "
              "recurse-submodules text textconv ignore-case max-depth= recursive word-regexp invert-match full-name "
              "extended-regexp basic-regexp perl-regexp fixed-strings line-number column files-with-matches "
              "name-only files-without-match *open-files-in-pager?= null only-matching count color?= break heading "
              "show-function function-context threads= and or not all-match quiet max-count= after-context= "
              "before-context= context=", numbers=True),
    "describe": S("", "contains debug all tags long first-parent abbrev?= exact-match candidates= match= "
                  "exclude= always dirty?= broken?="),
    "cat-file": S("epstb", "allow-unknown-type use-mailmap mailmap batch?= batch-check?= batch-command?= "
                  "batch-all-objects buffer follow-symlinks unordered textconv filters path= Z"),
    "show-ref": S("dsq", "tags heads verify head dereference hash?= abbrev?= quiet exclude-existing?= exists"),
    "for-each-ref": S("s", "shell perl python tcl count= format= color?= sort= points-at= merged?= contains?= "
                      "ignore-case omit-empty exclude= include-root-refs"),
    "merge-base": S("a", "all octopus independent is-ancestor fork-point"),
    "name-rev": S("", "name-only tags refs= exclude= all stdin annotate-stdin undefined always peel-tag"),
    "cherry": S("v"), "show-branch": S("ar", "all remotes topo-order date-order current color?= sha1-name "
                                            "more?= list merge-base independent no-name topics sparse reflog?="),
    "count-objects": S("vH", "verbose human-readable"),
    "var": S("l"), "version": S("", "build-options"), "help": S("aigmw", "all guides interactive man web "
                                                                       "verbose config user-interfaces "
                                                                       "developer-interfaces"),
    "check-ignore": S("qvnz", "quiet verbose stdin non-matching no-index"),
    "check-attr": S("az", "all cached stdin source="),
    "check-mailmap": S("", "stdin mailmap-file= mailmap-blob="),
    "check-ref-format": S("", "allow-onelevel refspec-pattern normalize branch"),
    "verify-commit": S("v", "verbose raw"), "verify-tag": S("v", "verbose raw format="),
    "fsck": S("", "unreachable dangling tags root cache no-reflogs full connectivity-only strict verbose "
              "lost-found progress name-objects name-only references"),
    "init": S("q b:", "quiet bare shared?= *separate-git-dir= object-format= ref-format= initial-branch= "
              "*template="),
    "clone": S("lsqvnob: *u: *c: j:", "local hardlinks shared reference= reference-if-able= dissociate quiet "
               "verbose progress server-option= no-checkout bare mirror origin= branch= revision= *upload-pack= "
               "*template= *config= depth= shallow-since= shallow-exclude= single-branch tags recurse-submodules?= "
               "shallow-submodules remote-submodules *separate-git-dir= ref-format= jobs= filter= "
               "also-filter-submodules bundle-uri= sparse reject-shallow"),
    "merge": S("envqsX: m: F: S::", _MERGE + " abort quit continue into-name="),
    "rebase": S("mqvnfirsX: C: *x: S::", _MERGE + " onto= keep-base continue skip abort quit edit-todo "
                "show-current-patch apply merge empty= keep-empty reapply-cherry-picks no-verify force-rebase "
                "fork-point ignore-whitespace whitespace= committer-date-is-author-date ignore-date "
                "reset-author-date interactive rebase-merges?= update-refs *exec= root autosquash "
                "reschedule-failed-exec trailer="),
    "cherry-pick": S("exrnsS:: m: X:", _PICK),
    "revert": S("enrsS:: m: X:", _PICK),
    "archive": S("lv0123456789 *o:", "list verbose format= prefix= *output= worktree-attributes add-file= "
                 "add-virtual-file= *remote= *exec= mtime="),
    "format-patch": S("nNksvq *o: " + _DIFF_SHORT, _REV + " " + _DIFF + " *output-directory= numbered start-number= "
                      "numbered-files keep-subject signoff stdout cover-letter attach?= inline?= thread?= "
                      "in-reply-to= ignore-if-in-upstream always cover-from-description= subject-prefix= "
                      "filename-max-length= rfc?= reroll-count= to= cc= from?= force-in-body-from add-header= "
                      "suffix= zero-commit base= progress interdiff= range-diff= creation-factor= signature= "
                      "signature-file= quiet", numbers=True),
    "apply": S("3Rzvq p: C:", "check stat numstat summary index cached intent-to-add 3way ours theirs union "
               "build-fake-ancestor= reverse reject unidiff-zero apply add allow-binary-replacement binary "
               "exclude= include= ignore-space-change ignore-whitespace whitespace= inaccurate-eof verbose quiet "
               "recount directory= allow-empty",
               risky={"--unsafe-paths": "writes outside the work tree"}),
    "notes": S("fmFc:C:", "ref= force message= file= reuse-message= reedit-message= allow-empty stdin "
               "ignore-missing dry-run verbose quiet commit abort strategy= separator?= stripspace"),
    "bisect": S("", "term-old= term-new= term-bad= term-good= no-checkout first-parent"),
    "stripspace": S("sc", "strip-comments comment-lines"),
    "gc": S("q", "aggressive auto quiet force keep-largest-pack",
            risky={"--prune": "deletes the unreachable objects lost work is recovered from"}),
    "reflog": S("", _REV + " " + _DIFF,
                risky={"--expire": "throws away git's record of where branches were",
                       "--expire-unreachable": "throws away git's record of where branches were",
                       "--rewrite": "rewrites the reflog", "--updateref": "rewrites the reflog",
                       "--stale-fix": "rewrites the reflog"}),
    "worktree": S("fdqb:B:", "force detach checkout lock reason= quiet track guess-remote orphan porcelain "
                  "verbose expire= relative-paths"),
    "submodule": S("qbfn", "quiet recursive cached files summary-limit= init remote no-fetch checkout merge "
                   "rebase recommend-shallow depth= jobs= single-branch filter= reference= dissociate "
                   "progress"),
    "sparse-checkout": S("", "cone sparse-index"),
    "merge-file": S("pq L:", "stdout quiet diff3 zdiff3 ours theirs union marker-size= diff-algorithm= object-id"),
    "merge-tree": S("z", "write-tree name-only messages allow-unrelated-histories merge-base= quiet stdin"),
    "bundle": S("q", "quiet progress all-progress all-progress-implied version="),
    "difftool": S("dgty *x:", "dir-diff gui tool= *extcmd= prompt trust-exit-code symlinks tool-help " + _DIFF),
    "mergetool": S("gty", "gui tool= prompt tool-help"),
    "checkout-index": S("uqanz", "index quiet all no-create stage= prefix= stdin temp ignore-skip-worktree-bits",
                        risky={"-f": "overwrites files in the work tree", "--force": "overwrites files in the "
                                                                                     "work tree"}),
    "read-tree": S("mnvi", "index-output= trivial aggressive empty prefix= exclude-per-directory= no-sparse-checkout "
                   "dry-run quiet recurse-submodules",
                   risky={"-u": "rewrites the work tree", "--reset": "throws away uncommitted changes"}),
    "hash-object": S("tw", "stdin stdin-paths no-filters literally path="),
    "write-tree": S("", "missing-ok prefix="), "commit-tree": S("p: m: F: S::", "gpg-sign?="),
    "update-index": S("q", "add remove refresh really-refresh cacheinfo= chmod= assume-unchanged "
                      "skip-worktree fsmonitor-valid ignore-submodules info-only index-info stdin verbose "
                      "untracked-cache test-untracked-cache split-index index-version= unmerged again "
                      "ignore-missing fsmonitor"),
    "update-ref": S("dmz", "no-deref stdin create-reflog"), "symbolic-ref": S("dqm:", "delete quiet short "
                                                                                     "recurse"),
    "mktag": S("", "strict"), "mktree": S("z", "missing batch"),
    "verify-pack": S("vs", "verbose stat-only object-format="),
    "pack-refs": S("", "all prune auto include= exclude="),
    "prune": S("nv", "dry-run verbose progress"),
    "repack": S("adlfFqnk", "quiet local"),
    "replace": S("lf", "list format= force edit graft convert-graft-file raw"),
    "rerere": S(""), "maintenance": S("", "quiet auto schedule= task= scheduler="),
    "commit-graph": S("", "object-dir= progress"),
    "citool": S(""), "filter-branch": S(""), "am": S(""),
}

GIT: dict[str, Spec] = {sub: dataclasses.replace(table, negatable=True) for sub, table in _TABLES.items()}
NO_OPTIONS = S("")  # a subcommand without a table: any option asks
