"""Option tables of the programs that only read and print (and of bash's builtins): every option each one
has, as GNU coreutils, util-linux, procps, diffutils and bash document them, with its arity.

An option that is missing here asks, so the lists are complete rather than short; the few options of these
programs that write or delete are marked or listed as risky (``file -C``, ``ss -K``, ``lastlog -C``).
Free-form programs (``echo``, ``test``, ``expr``) read no options at all: every word is an operand.
"""

from __future__ import annotations

from tools.shell.options import Spec
from tools.shell.options import spec as S

FREE = S(free=True)
_GNU = " help version"

LS = S("aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1 I: T: w:",
       "all almost-all author escape block-size= ignore-backups color?= colour?= directory dired classify?= "
       "file-type format= full-time group-directories-first no-group human-readable si dereference-command-line "
       "dereference-command-line-symlink-to-dir hide= hyperlink?= indicator-style= inode ignore= kibibytes "
       "dereference numeric-uid-gid literal hide-control-chars show-control-chars quote-name quoting-style= "
       "reverse recursive size sort= time= time-style= tabsize= width= context zero" + _GNU)
_SUMS = "binary check tag text ignore-missing quiet status strict warn zero" + _GNU
SUMS = S("bctwz", _SUMS)
_DIFF_SHORT = "abBdeEilnNpqrsStTuvwyZ c: C: D: F: I: L: S: U: W: x: X:"
_DIFF_LONG = ("normal brief report-identical-files context?= unified?= ed rcs side-by-side width= left-column "
         "suppress-common-lines show-c-function show-function-line= label= expand-tabs initial-tab tabsize= "
         "suppress-blank-empty paginate new-file unidirectional-new-file ignore-case ignore-file-name-case "
         "no-ignore-file-name-case ignore-tab-expansion ignore-trailing-space ignore-space-change "
         "ignore-all-space ignore-blank-lines ignore-matching-lines= text strip-trailing-cr recursive "
         "no-dereference exclude= exclude-from= starting-file= from-file= to-file= old-line-format= "
         "new-line-format= unchanged-line-format= line-format= old-group-format= new-group-format= "
         "changed-group-format= unchanged-group-format= ifdef= minimal horizon-lines= speed-large-files color?= "
         "palette= binary" + _GNU)
DIFF = S(_DIFF_SHORT, _DIFF_LONG, numbers=True)
GREP = S("abcEFGhHiIlLnoPqrRsTuUvVwxyzZ A: B: C: d: D: e: f: m:",
         "extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case "
         "word-regexp line-regexp null-data no-messages invert-match max-count= byte-offset line-number "
         "line-buffered with-filename no-filename label= only-matching quiet silent binary-files= text "
         "directories= devices= recursive dereference-recursive include= exclude= exclude-from= exclude-dir= "
         "files-without-match files-with-matches count initial-tab null before-context= after-context= "
         "context= group-separator= no-group-separator color?= colour?= binary" + _GNU, numbers=True)
BASE = S("di w:", "decode ignore-garbage wrap=" + _GNU)
HEXDUMP = S("bcCdoxLvhV e: f: n: s:", "canonical color?= format= format-file= length= skip= no-squeezing "
            "one-byte-octal one-byte-char two-bytes-decimal two-bytes-octal two-bytes-hex" + _GNU)
CAL = S("13bCeHhJjmMnopSvwyYV A: B: c: d: s:", "one three months= span sunday monday julian reform= iso year "
        "twelve week?= vertical color?= columns=" + _GNU, numbers=True)
XZCAT = S("zdtlkfcqvhHVQe0123456789 T: M:", "compress decompress test list keep force stdout extreme quiet "
          "verbose help long-help version threads= memlimit= memory= single-stream no-sparse files?= files0?= "
          "format= no-warn robot suffix=")
# A declaration's words are read by ``declaration`` (check.py), never dispatched: listed for completeness.
DECLARE = S("aAfFgiIlnprtux", plus=True)

CORE: dict[str, Spec] = {
    "ls": LS, "dir": LS, "vdir": LS,
    "cat": S("AbeEnstTuv", "show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting"
             + _GNU),
    "tac": S("br s:", "before regex separator=" + _GNU),
    "nl": S("p b: d: f: h: i: l: n: s: v: w:",
            "body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= "
            "join-blank-lines= number-format= no-renumber number-separator= starting-line-number= number-width="
            + _GNU),
    "head": S("qvz c: n:", "bytes= lines= quiet silent verbose zero-terminated" + _GNU, numbers=True),
    "tail": S("fFqvz c: n: s:", "bytes= follow?= lines= max-unchanged-stats= pid= quiet silent retry "
              "sleep-interval= verbose zero-terminated" + _GNU, numbers=True),
    "wc": S("cmlLw", "bytes chars lines files0-from= max-line-length words total=" + _GNU),
    "cut": S("nszM b: c: d: f:", "bytes= characters= delimiter= fields= complement only-delimited "
             "output-delimiter= zero-terminated" + _GNU),
    "paste": S("sz d:", "delimiters= serial zero-terminated" + _GNU),
    "join": S("iz a: e: j: o: t: v: 1: 2:", "ignore-case check-order nocheck-order header zero-terminated" + _GNU),
    "comm": S("123z", "check-order nocheck-order output-delimiter= total zero-terminated" + _GNU),
    "cmp": S("blsv i: n:", "print-bytes ignore-initial= verbose bytes= quiet silent" + _GNU),
    "diff": DIFF,
    "column": S("tdeJxhVL n: O: N: l: E: H: R: T: W: r: i: p: c: o: s:",
                "columns= fillrows json keep-empty-lines output-separator= output-width= separator= table "
                "table-columns= table-columns-limit= table-empty-lines table-header-repeat table-hide= "
                "table-name= table-noextreme= table-noheadings table-order= table-right= table-truncate= "
                "table-wrap= tree= tree-id= tree-parent= use-spaces=" + _GNU),
    "fold": S("bs w:", "bytes spaces width=" + _GNU, numbers=True),
    "fmt": S("cstu p: w: g:", "crown-margin prefix= split-only tagged-paragraph uniform-spacing width= goal="
             + _GNU, numbers=True),
    "expand": S("i t:", "initial tabs=" + _GNU, numbers=True),
    "unexpand": S("a t:", "all first-only tabs=" + _GNU, numbers=True),
    "rev": S("hV0", "zero" + _GNU),
    "strings": S("adfhowvV n: t: T: e: s: U:", "all data print-file-name bytes= radix= target= "
                 "include-all-whitespace encoding= output-separator= unicode=" + _GNU, numbers=True),
    "od": S("abcdDfhHiIlLosOvxX A: j: N: S: t: w::", "address-radix= endian= skip-bytes= read-bytes= strings?= "
            "format= output-duplicates width?= traditional" + _GNU),
    "hexdump": HEXDUMP, "hd": HEXDUMP,
    "base64": BASE, "base32": BASE,
    "basenc": S("di w:", "decode ignore-garbage wrap= base64 base64url base32 base32hex base16 base2msbf "
                "base2lsbf z85" + _GNU),
    "md5sum": SUMS, "sha1sum": SUMS, "sha224sum": SUMS, "sha256sum": SUMS, "sha384sum": SUMS, "sha512sum": SUMS,
    "b2sum": S("bctwz l:", "length= " + _SUMS),
    "cksum": S("czw a: l:", "algorithm= base64 check debug ignore-missing length= quiet raw status strict tag "
               "untagged warn zero" + _GNU),
    "sum": S("rs", "sysv" + _GNU),
    "seq": S("w f: s:", "equal-width format= separator=" + _GNU, numbers=True),
    "pwd": S("LP", "logical physical" + _GNU),
    "cal": CAL, "ncal": CAL,
    "whoami": S("", _GNU), "groups": S("", _GNU), "users": S("", _GNU), "logname": S("", _GNU),
    "arch": S("", _GNU), "nproc": S("", "all ignore=" + _GNU), "tty": S("s", "silent quiet" + _GNU),
    "id": S("aZgGnruz", "context group groups name real user zero" + _GNU),
    "who": S("abdHlmpqrstTuw", "all boot count dead heading ips login lookup mesg message process runlevel short "
             "time users writable" + _GNU),
    "w": S("hsfouipV", "no-header no-current short from ip-addr pids old-style" + _GNU),
    "uptime": S("phsV", "pretty since container raw" + _GNU),
    "uname": S("asnrvmpio", "all kernel-name nodename kernel-release kernel-version machine processor "
               "hardware-platform operating-system" + _GNU),
    "locale": S("amckv?V", "all-locales charmaps category-name keyword-name verbose usage" + _GNU),
    "getconf": S("a v:"),
    "printenv": S("0", "null" + _GNU),
    "which": S("aisvV", "all skip-dot skip-tilde show-dot show-tilde tty-only read-alias skip-alias read-functions "
               "skip-functions" + _GNU),
    "whereis": S("bmsulfgVh B: M: S:", _GNU),
    "type": S("afpPt"),
    "file": S("0bcdhiklLnNprsSvzZ e: f: F: m: P:",
              "apple brief checking-printout debug dereference exclude= exclude-quiet= extension files-from= "
              "keep-going list magic-file= mime mime-encoding mime-type no-buffer no-dereference no-pad no-sandbox "
              "parameter= preserve-date print0 raw separator= special-files uncompress uncompress-noreport" + _GNU,
              risky={"-C": "compiles a magic file into the working directory",
                     "--compile": "compiles a magic file into the working directory"}),
    "stat": S("Lft c:", "dereference file-system cached= format= printf= terse" + _GNU),
    "du": S("0abcDhHklLmPsSx B: d: t: X:",
            "all apparent-size block-size= bytes count-links dereference dereference-args exclude= exclude-from= "
            "files0-from= human-readable inodes max-depth= no-dereference null one-file-system separate-dirs si "
            "summarize threshold= time?= time-style= total" + _GNU),
    "df": S("ahHiklPTv B: t: x:", "all block-size= exclude-type= human-readable inodes local no-sync output?= "
            "portability print-type si sync total type=" + _GNU),
    "free": S("bkmghltvwV s: c:", "bytes kibi mebi gibi tebi pebi kilo mega giga tera peta human si lohi line "
              "total committed seconds= count= wide" + _GNU),
    "ps": S("AaCdeFfHjlLMmNPrSTVwxyZc C: G: g: O: o: p: q: s: t: U: u: k:",
            "Group= User= cols= columns= context cumulative deselect forest format= group= headers help?= info "
            "lines= no-headers pid= ppid= quick-pid= rows= sid= sort= tty= user= version width="),
    "pgrep": S("acfhilnorvwxALV d: F: g: G: O: P: r: s: t: u: U:",
               "count delimiter= euid exact full group= help ignore-ancestors ignore-case inverse lightweight "
               "list-full list-name logpidfile newest ns= nslist= older= oldest parent= pgroup= pidfile= "
               "runstates= session= terminal= uid= env= cgroup= require-handler signal= quiet version"),
    "pidof": S("cnqstwxz o: S: d:", "help version"),
    "pstree": S("aAcgGhlnpsStTuUVZ C: H: N:",
                "arguments ascii color= compact-not hide-threads highlight-all highlight-pid= long ns-changes "
                "ns-sort= numeric-sort security-context show-parents show-pgids show-pids thread-names uid-changes "
                "unicode version vt100"),
    "lsblk": S("ADJMOPSTabdfilmnprstyzhV E: I: e: o: w: x: Q:",
               "all ascii bytes dedup= discard exclude= filter= fs help highlight= include= inverse json list "
               "merge nodeps noempty noheadings output= output-all pairs paths perms raw scsi shell sort= sysroot= "
               "topology tree?= version width= zoned properties-by= hyperlink?= ct= ct-filter="),
    "lscpu": S("abBCcJepxyhV s:", "all bytes caches?= extended?= hex json offline online output-all parse?= "
               "physical sysroot= raw hierarchic?=" + _GNU),
    "lsmem": S("JPabnrhV o: S: s:", "all bytes json noheadings output= output-all pairs raw split= summary?= "
               "sysroot=" + _GNU),
    "lsof": S("abChlnNOPRtUvVXwx? c: d: D: e: E: F: g: i:: k: K: m: o:: p: r:: s:: S:: T:: u: z:: Z::", plus=True),
    "lspci": S("bDkmMnPqstvxhV A: d: F: H: i: p: O: s:", _GNU),
    "lsusb": S("vtVh s: d: D:", "verbose tree version help"),
    "findmnt": S("smkpAabCcDefiJlnPRrUuvyxhV w: d: F: N: O: o: S: T: M: t: H: I: Q:",
                 "all ascii bytes canonicalize df direction= evaluate first-only fstab json kernel list mountpoint= "
                 "mtab nocanonicalize nofsroot noheadings notruncate options= output= output-all pairs poll?= pseudo "
                 "raw real shadowed shell source= submounts tab-file= target= task= timeout= tree types= uniq "
                 "verbose verify vfs-all id= uniq-id= filter= list-columns invert" + _GNU),
    "ss": S("hVnraloempTisbEZzN460tMSudwxHO f: A: F:",
            "all bpf cgroup context contexts dccp events extended family= filter= inet-sockopt info ipv4 ipv6 "
            "listening memory mptcp net= no-header numeric oneline options packet processes query= raw resolve "
            "sctp socket= summary tcp threads tipc tipcinfo tos udp unix vsock xdp" + _GNU,
            risky={"-K": "closes sockets", "--kill": "closes sockets",
                   "-D": "dumps raw socket information into a file", "--diag": "dumps raw socket information "
                                                                              "into a file"}),
    "netstat": S("rigsMvWnNepoclaFCZT A:", "all cache context continuous extend fib groups interfaces listening "
                 "masquerade numeric numeric-hosts numeric-ports numeric-users programs protocol= route statistics "
                 "symbolic timers verbose wide tcp udp udplite raw unix inet inet6" + _GNU),
    "ping": S("346aAbBdDfhHLnOqrRUvV c: e: F: i: I: l: m: M: N: p: Q: s: S: t: T: w: W:"),
    "ping6": S("346aAbBdDfhHLnOqrRUvV c: e: F: i: I: l: m: M: N: p: Q: s: S: t: T: w: W:"),
    # Every option of these only changes the query: ``+short``, ``-type=mx``.
    "dig": FREE, "nslookup": FREE,
    "host": S("46aACdilrsTUvVw c: m: N: p: R: t: W:"),
    "getent": S("hiVA? s:", "service= no-idn no-addrconfig usage" + _GNU),
    "realpath": S("emLPqsz", "canonicalize-existing canonicalize-missing logical physical quiet relative-to= "
                  "relative-base= strip no-symlinks zero" + _GNU),
    "readlink": S("femnqsvz", "canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent "
                  "verbose zero" + _GNU),
    "basename": S("az s:", "multiple suffix= zero" + _GNU),
    "dirname": S("z", "zero" + _GNU),
    "pathchk": S("pP", "portability" + _GNU),
    "bc": S("hilqswvgCcPRz e: f:", "help interactive mathlib quiet standard warn version expression= file= "
            "global-stacks digit-clamp no-digit-clamp no-prompt no-read-prompt"),
    "numfmt": S("zM d:", "debug delimiter= field= format= from= from-unit= grouping header?= invalid= padding= "
                "round= suffix= to= to-unit= zero-terminated unit-separator=" + _GNU, numbers=True),
    "tsort": S("", _GNU),
    "pr": S("acdFfhJmrtTv D: e:: i:: l: n:: N: o: s:: S:: w: W:",
            "across columns= date-format= double-space expand-tabs?= first-line-number= form-feed header= indent= "
            "join-lines length= merge no-file-warnings number-lines?= omit-header omit-pagination output-tabs?= "
            "page-width= sep-string?= separator?= show-control-chars show-nonprinting width=" + _GNU, numbers=True),
    "look": S("adfhV t:", "alphanum alternative ignore-case terminate=" + _GNU),
    "grep": GREP, "egrep": GREP, "fgrep": GREP, "zgrep": GREP,
    "jq": S("acCejMnrRsSbhV f: L:", "arg=2 argjson=2 slurpfile=2 rawfile=2 args jsonargs tab indent= seq stream "
            "stream-errors slurp raw-input null-input compact-output color-output monochrome-output ascii-output "
            "unbuffered sort-keys raw-output raw-output0 join-output exit-status from-file= binary "
            "build-configuration" + _GNU),
    "tput": S("SVx T:"), "clear": S("Vx T:"),
    "tr": S("cCdst", "complement delete squeeze-repeats truncate-set1" + _GNU),
    "sync": S("df", "data file-system" + _GNU),
    "vmstat": S("afmnsdDwtyhV p: S: c:", "active disk disk-sum forks no-first one-header partition= slabs stats "
                "timestamp unit= wide" + _GNU),
    "iostat": S("cdhkmNtVxyzH g: j: o: p:", "dec= human pretty compact" + _GNU),
    "mpstat": S("AnuITV I: N: o: P:", "dec=" + _GNU),
    "last": S("adFiRwxhV f: n: s: t: p:", "dns file= fullnames fulltimes hostlast ip limit= nohostname present= "
              "since= system time-format= until=" + _GNU, numbers=True),
    "lastlog": S("h b: R: t: u:", "before= root= time= user=" + _GNU,
                 risky={"-C": "clears lastlog records", "--clear": "clears lastlog records",
                        "-S": "changes lastlog records", "--set": "changes lastlog records"}),
    "top": S("bcHiSs1hV d: n: o: O: p: u: U: E: e: w::",
             "accum-time-toggle batch-mode cmdline-toggle delay= filter-any-user= filter-only-euser= idle-toggle "
             "iterations= list-fields pid= scale-summary-mem= scale-task-mem= secure-mode single-cpu-toggle "
             "sort-override= threads-show width?=" + _GNU),
    "htop": S("CHMtVh d: F: p: s: u::", "delay= no-color no-colour filter= highlight-changes?= no-mouse "
              "no-meters pid= readonly sort-key= tree user?= no-unicode" + _GNU),
    "whatis": S("dvrwl?V C: L: m: M: s:", "config-file= debug locale= long manpath= regex section= sections= "
                "systems= usage verbose wildcard" + _GNU),
    "apropos": S("dverwal?V C: L: m: M: s:", "and config-file= debug exact locale= long manpath= regex section= "
                 "sections= systems= usage verbose wildcard" + _GNU),
    "zcat": S("fhlLqrtvV S:", "force license list quiet recursive suffix= synchronous test verbose" + _GNU),
    "bzcat": S("sqvhVLdzkftc123456789", "small quiet verbose license decompress compress keep force test stdout "
               "fast best" + _GNU),
    "xzcat": XZCAT, "lzcat": XZCAT,
    "zstdcat": S("qvhVdfcrlkT0123456789 D: M:", "quiet verbose memory= long?= no-check decompress force stdout "
                 "keep test single-thread ultra fast?= adapt?= auto-threads= priority=" + _GNU),
    "tldr": S("hvlucqr p: L: f:", "list render= platform= language= update clear-cache seed-config show-paths "
              "raw quiet color=" + _GNU),
    "lsattr": S("RVadlpv"),
    "colordiff": S(_DIFF_SHORT, _DIFF_LONG + " difftype=", numbers=True),
    "wdiff": S("123adhiKlnpstvV w: x: y: z:", "no-deleted no-inserted no-common auto-pager diff-input ignore-case "
               "less-mode avoid-wraps printer statistics terminal start-delete= end-delete= start-insert= "
               "end-insert= no-init-term" + _GNU),
    # bash builtins
    "echo": FREE, "printf": FREE, "true": FREE, "false": FREE, ":": FREE, "test": FREE, "[": FREE, "[[": FREE,
    "expr": FREE, "factor": FREE, "yes": FREE, "sleep": FREE, "let": FREE, "getopts": FREE, "shift": FREE,
    "return": FREE, "exit": FREE, "break": FREE, "continue": FREE, "logout": FREE, "caller": FREE, "times": FREE,
    "bg": FREE, "fg": FREE, "eval": FREE, "source": FREE, ".": FREE,
    "wait": S("fn p:"),
    "jobs": S("lnprs *x"),
    "dirs": S("clpv", numbers=True, plus=True),
    "help": S("dms"),
    "umask": S("pS"),
    "shopt": S("opqsu"),
    "set": S("abBCefhHkmnpPtTuvxE o:", plus=True),
    "complete": S("abcdefgjksuvDEIpr A: C: F: G: o: P: S: W: X:", plus=True),
    "compopt": S("DEI o:", plus=True),
    "compgen": S("abcdefgjksuvDEI A: *C: *F: G: o: P: S: *W: X: V:"),
    "disown": S("ahr"),
    "unalias": S("a"),
    "read": S("ers a: d: i: n: N: p: t: u:"),
    "mapfile": S("t d: n: O: s: u: *C: c:"), "readarray": S("t d: n: O: s: u: *C: c:"),
    "unset": S("fvn"),
    "local": DECLARE, "declare": DECLARE, "typeset": DECLARE, "export": S("fnp", plus=True),
    "readonly": S("aAfp", plus=True),
    "ulimit": S("abcdefHiklmnpqrsStuvxPRT", numbers=True),
    "hash": S("dlrt *p:"),
    "enable": S("adnps *f:"),
    "history": S("c *a *n *r *w p s d:", numbers=True),
    "fc": S("lnrs *e:", numbers=True),
    "alias": S("p"),
    "cd": S("LPe@"),
    "pushd": S("n", numbers=True, plus=True), "popd": S("n", numbers=True, plus=True),
    "trap": S("lp"),
}
