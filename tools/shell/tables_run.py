"""Option tables of the programs that run others (wrappers, shells, interpreters, database clients) and of
the system tools with rules of their own (systemctl, journalctl, man, less, rg, fd, ruff, docker, ssh...).

Options end at the first operand for wrappers and interpreters (what follows is the command or the
script's own argv). Options that load code (``perl -M``/``-d``, ``php -z``, ``node --inspect``, ``-X
presite``), write files (``strace -o``, ``valgrind --log-file``, ``gawk -o``, ``psql -L``, ``mysql --tee``)
or start servers are marked or risky; a value an option runs is checked as a command.
"""

from __future__ import annotations

from tools.shell.options import Spec
from tools.shell.options import spec as S

FREE = S(free=True)
_GNU = " help version"
_DB_OPTS = "help version"

WRAPPER_TABLES: dict[str, Spec] = {
    "sudo": S("AbBEeHiKklnPSsVv h: u: g: *C: *D: p: r: t: U: T: R:", "askpass background bell close-from= *chdir= "
              "preserve-env?= edit group= set-home host= login remove-timestamp reset-timestamp list "
              "non-interactive preserve-groups prompt= chroot= role= stdin shell type= command-timeout= other-user= "
              "user= validate" + _GNU, stop=True),
    "doas": S("nsL u: *C:", stop=True),
    "run0": S("h u: g: *D:", "user= group= *chdir= unit= property= description= slice= setenv= nice= machine= "
              "background= no-ask-password" + _GNU, stop=True),
    "pkexec": S("", "user= disable-internal-agent keep-cwd" + _GNU, stop=True),
    "env": S("i0v u: *C: *S: a:", "block-signal?= *chdir= debug default-signal?= ignore-environment "
             "ignore-signal?= list-signal-handling null *split-string= unset= argv0=" + _GNU, stop=True),
    "nice": S("n:", "adjustment=" + _GNU, stop=True, numbers=True),
    "nohup": S("", _GNU, stop=True),
    "timeout": S("v k: s:", "foreground kill-after= preserve-status signal= verbose" + _GNU, stop=True),
    "stdbuf": S("i: o: e:", "input= output= error=" + _GNU, stop=True),
    "ionice": S("thV c: n: p: P: u:", "class= classdata= ignore pid= pgid= uid=" + _GNU, stop=True),
    "setsid": S("cfwhV", "ctty fork wait" + _GNU, stop=True),
    "time": S("pvqaV f: *o:", "format= *output= append verbose quiet portability" + _GNU, stop=True),
    "exec": S("cl a:", stop=True),
    "command": S("pvV", stop=True),
    "builtin": S(stop=True),
    "chrt": S("bdfiorRampvhVe T: P: D:", "all-tasks batch deadline fifo idle max other pid reset-on-fork rr "
              "sched-deadline= sched-period= sched-runtime= verbose ext" + _GNU, stop=True, numbers=True),
    "taskset": S("apchV", "all-tasks cpu-list pid" + _GNU, stop=True),
    "busybox": S("", "list list-full" + _GNU, stop=True, risky={"--install": "installs links to its applets"}),
    "toybox": S("", "long" + _GNU, stop=True),
    "chroot": S("", "groups= skip-chdir userspec=" + _GNU, stop=True),
    "xargs": S("0oprtx a: d: E: I: L: n: P: s: e:: i:: l::", "arg-file= delimiter= eof?= exit interactive "
               "max-args= max-chars= max-lines?= max-procs= no-run-if-empty null open-tty process-slot-var= "
               "replace?= show-limits verbose" + _GNU, stop=True),
    "parallel": S("0jkqnNIXmuvrh j: n: N: I: a: C: d: E:",
                  "jobs= keep-order quote null max-args= max-replace-args= replace?= xargs dry-run will-cite bar "
                  "eta progress line-buffer tag tagstring= halt= timeout= delay= group ungroup verbose arg-file= "
                  "colsep= trim= no-run-if-empty plus shuf delimiter= eof?= pipe block= recstart= recend= header= "
                  "link xapply retries= nice= memfree= load= files fifo cat lb >joblog= >results= >tmpdir= "
                  "resume resume-failed citation" + _GNU, stop=True,
                  risky={"-S": "runs the command on other machines", "--sshlogin": "runs the command on other "
                                                                                   "machines",
                         "--sshloginfile": "runs the command on other machines",
                         "--transfer": "copies files to other machines", "--return": "copies files back from other "
                                                                                     "machines",
                         "--cleanup": "deletes files on other machines", "--basefile": "copies files to other "
                                                                                       "machines"}),
    "strace": S("DfzZiknAqrtTvxyYcCwdhV b: e: p: u: I: P: a: *o: s: X: O: S: U:",
                "abbrev= absolute-timestamps?= attach= columns= const-print-style= daemonize?= debug decode-fds?= "
                "decode-pids?= detach-on= failed-only fault= follow-forks help inject= instruction-pointer "
                "interruptible= kvm= no-abbrev *output= output-append-mode output-separately quiet?= raw= read= "
                "relative-timestamps?= seccomp-bpf signal= stack-traces status= string-limit= strings-in-hex?= "
                "successful-only summary summary-columns= summary-only summary-sort-by= summary-syscall-overhead= "
                "summary-wall-clock syscall-number syscall-times?= tips?= trace= trace-path= user= verbose= "
                "version write=", stop=True,
                risky={"-E": "sets the traced command's environment", "--env": "sets the traced command's "
                                                                               "environment"}),
    "ltrace": S("bcCfhiLrStTVw n: a: A: D: e: F: l: *o: p: s: u: x:", "align= demangle debug= indent= output= "
                "library= config= no-signals" + _GNU, stop=True),
    "flock": S("sxunoFhV w: E: *c:", "shared exclusive unlock nonblock close no-fork timeout= conflict-exit-code= "
               "*command= verbose" + _GNU, stop=True),
    "unshare": S("muinpUCTfrchV R: w: S: G:", "boottime= cgroup?= fork ipc?= keep-caps kill-child?= map-auto "
                 "map-current-user map-group= map-groups= map-root-user map-user= map-users= monotonic= mount?= "
                 "mount-proc?= net?= pid?= propagation= root= setgid= setgroups= setuid= time?= user?= uts?= wd= "
                 "load-interp=" + _GNU, stop=True),
    "watch": S("bcdegptwxhvr q: n:", "beep chgexit color no-color differences?= equexit= errexit exec interval= "
               "no-title no-wrap no-linewrap precise no-rerun shotsdir=" + _GNU, stop=True),
    "unbuffer": S("p", stop=True),
    "caffeinate": S("dimsu t: w:", stop=True),
    "catchsegv": S(stop=True),
    "fakeroot": S("uh i: b:", "unknown-is-real" + _GNU, stop=True,
                  risky={"-l": "loads another library into the command", "--lib": "loads another library into the "
                                                                                   "command",
                         "--faked": "runs another daemon", "-s": "saves its state into a file"}),
    "dbus-run-session": S("", _GNU, stop=True, risky={"--config-file": "starts a bus with another configuration",
                                                       "--dbus-daemon": "runs another bus daemon"}),
    "xvfb-run": S("ahn: l p: s: >e: >f: w:", "auto-servernum auto-display >error-file= >auth-file= server-num= "
                  "listen-tcp xauth-protocol= server-args= wait= help", stop=True),
    "firejail": S("", "quiet noprofile private?= private-tmp private-dev private-cache net= nonewprivs seccomp "
                  "caps.drop= noroot read-only= whitelist= blacklist= nosound no3d novideo x11= debug apparmor "
                  "ipc-namespace machine-id nogroups" + _GNU, stop=True),
    "valgrind": S("qvh", "tool= quiet verbose trace-children?= child-silent-after-fork= track-fds= time-stamp= "
                  "leak-check= show-leak-kinds= errors-for-leak-kinds= track-origins= num-callers= error-exitcode= "
                  "error-limit= show-error-list= suppressions= gen-suppressions= >log-file= log-fd= xml= "
                  ">xml-file= xml-fd= demangle= read-var-info= read-inline-info= max-stackframe= main-stacksize= "
                  "undef-value-errors= keep-stacktraces= freelist-vol= show-reachable= smc-check= help-debug "
                  "help-dyn-options trace-children-skip= trace-children-skip-by-arg= exit-on-first-error= "
                  "error-markers= keep-debuginfo= show-below-main= default-suppressions= input-fd= alignment= "
                  "redzone-size= fullpath-after= extra-debuginfo-path= allow-mismatched-debuginfo= "
                  "run-libc-freeres= run-cxx-freeres= sim-hints= fair-sched= kernel-variant= "
                  "merge-recursive-frames= num-transtab-sectors= avg-transtab-entry-size= aspace-minaddr= "
                  "valgrind-stacksize= show-emwarns= require-text-symbol= soname-synonyms= sigill-diagnostics= "
                  "unw-stack-scan-thresh= unw-stack-scan-frames= resync-filter= max-threads= leak-resolution= "
                  "leak-check-heuristics= partial-loads-ok= expensive-definedness-checks= freelist-big-blocks= "
                  "workaround-gcc296-bugs= ignore-ranges= ignore-range-below-sp= malloc-fill= free-fill= "
                  "show-mismatched-frees= >xtree-memory-file= >xtree-leak-file= xtree-memory= xtree-leak=" + _GNU,
                  stop=True),
    "coproc": FREE, "then": FREE, "do": FREE, "else": FREE, "!": FREE, "{": FREE, "}": FREE,
    # These always ask: they run the command outside this session.
    "systemd-run": FREE, "nsenter": FREE,
}

_BASH = S("abBcCefhHiklmnprstuvxDEPT o: O:", "*debugger *debug dump-po-strings dump-strings help *init-file= *rcfile= "
          "login noediting noprofile norc posix pretty-print restricted verbose version", stop=True, plus=True,
          risky={"--debugger": "loads the bash debugger's start-up code",
                 "--debug": "loads the bash debugger's start-up code"})
_POSIX_SH = S("aCefhimnuvxlcsEbVp o:", stop=True, plus=True)
_KSH = S("abcefhiklmnprsuvxXUC o: T:", stop=True, plus=True)
_CSH = S("bcdefimnqstvVxX", stop=True)
SHELLS: dict[str, Spec] = {
    "bash": _BASH, "rbash": _BASH, "sh": _POSIX_SH, "dash": _POSIX_SH, "ash": _POSIX_SH, "posh": _POSIX_SH,
    "ksh": _KSH, "mksh": _KSH, "oksh": _KSH, "loksh": _KSH, "yash": _KSH, "csh": _CSH, "tcsh": _CSH,
    "zsh": S("abBcCdDeEfFgGhHiIjJkKlLmMnNpPqQrRsStTuUvVwWxXyYzZ0123456789 o:",
             "no-rcs norcs rcs login interactive shinstdin version help emulate= no-globalrcs", stop=True, plus=True),
    "fish": S("ilnNPvhc d: f: !C: >o: >p:", "command= *init-command= debug= features= interactive login "
              "no-config no-execute private version help print-rusage-self print-debug-categories "
              ">debug-output= >profile= >profile-startup=", stop=True),
}
# What each shell reads from the home (the workspace) whatever its options, and the option that skips it.
# Options an interpreter rule reads as code only when their value is the next word: ``--file=x`` asks.
ATTACHED_UNREAD: dict[str, frozenset[str]] = {
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk", "busybox-awk"), frozenset({"--file", "--source"})),
    "php": frozenset({"--run", "--process-begin", "--process-code", "--process-file", "--process-end"}),
}
SHELL_RCS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "zsh": ((".zshenv",), ("-f", "--no-rcs", "--norcs")),
    "fish": ((".config/fish/config.fish", ".config/fish/conf.d"), ("-N", "--no-config")),
    "csh": ((".cshrc", ".login"), ("-f",)),
    "tcsh": ((".tcshrc", ".cshrc", ".login"), ("-f",)),
}

_PY_X = (r"(importtime|dev|utf8|faulthandler|tracemalloc|int_max_str_digits|frozen_modules|no_debug_ranges|"
         r"warn_default_encoding|perf|perf_jit|cpu_count|gil|showrefcount|disable-remote-debug|"
         r"thread_inherit_context|context_aware_warnings)(=[\w.]*)?")
_PY_W = r"\w*(:[^:]*(:([A-Za-z_]\w*)?(:[^:]*(:\d*)?)?)?)?"  # a category by its bare name: no module is imported
_PYTHON = S("bBdEhiIOPqsSuvVx? *c: *m: W: X:", "help help-env help-xoptions help-all version "
            "check-hash-based-pycs=", stop=True, ends="-c -m", values={"-X": _PY_X, "-W": _PY_W})
_PERL_MODULE = r"(?s)-?[A-Za-z_]\w*(::\w+)*(=.*)?"
_PERL = S("acfnpsStTUvwWXh *e: *E: I: F:: *i:: l:: M:: m:: D:: x:: 0:: C:: V::", "help version", stop=True,
          values={"-M": _PERL_MODULE, "-m": _PERL_MODULE, "-i": r"[^/]*"},
          risky={"-d": "runs the perl debugger or a Devel module", "-u": "dumps core"})
_RUBY = S("acdhlnpsSvwyU *e: *r: I: C: E: F:: K:: T:: W:: x:: 0:: *i::",
          "copyright enable= disable= external-encoding= internal-encoding= encoding= verbose version help jit yjit "
          "rjit backtrace-limit= dump=", stop=True, values={"-i": r"[^/]*"},
          risky={"--crash-report": "writes a crash report file"})
_NODE = S("hvcip *e: *p: *r: C:",
          "eval= print= check interactive no-warnings no-deprecation trace-warnings "
          "trace-deprecation throw-deprecation pending-deprecation enable-source-maps max-old-space-size= "
          "max-semi-space-size= stack-size= stack-trace-limit= experimental-vm-modules experimental-modules "
          "experimental-specifier-resolution= experimental-json-modules experimental-repl-await "
          "experimental-wasm-modules experimental-fetch experimental-global-webcrypto "
          "experimental-import-meta-resolve experimental-strip-types experimental-transform-types "
          "experimental-detect-module no-experimental-fetch no-experimental-strip-types input-type= "
          "unhandled-rejections= preserve-symlinks preserve-symlinks-main abort-on-uncaught-exception title= "
          "tls-min-v1.2 tls-min-v1.3 use-openssl-ca use-bundled-ca zero-fill-buffers frozen-intrinsics "
          "disallow-code-generation-from-strings jitless harmony expose-gc v8-options completion-bash "
          "max-http-header-size= insecure-http-parser dns-result-order= conditions= no-addons "
          "no-global-search-paths trace-uncaught trace-exit trace-sigint force-fips enable-fips secure-heap= "
          "no-extra-info-on-fatal-exception version help allow-addons allow-child-process allow-wasi allow-worker "
          "cpu-prof cpu-prof-interval= heap-prof heap-prof-interval= disable-proto= disable-warning= "
          "experimental-default-type= experimental-require-module no-experimental-require-module "
          "experimental-eventsource experimental-websocket experimental-print-required-tla "
          "no-experimental-detect-module no-experimental-global-customevent no-experimental-global-webcrypto "
          "no-experimental-repl-await force-context-aware force-node-api-uncaught-exceptions-policy= "
          "heapsnapshot-near-heap-limit= huge-max-old-generation-size interpreted-frames-native-stack "
          "network-family-autoselection-attempt-timeout= enable-network-family-autoselection "
          "no-network-family-autoselection node-memory-debug openssl-legacy-provider openssl-shared-config prof "
          "report-compact report-on-fatalerror report-on-signal report-signal= report-uncaught-exception "
          "report-exclude-network secure-heap-min= tls-cipher-list= >tls-keylog= tls-max-v1.2 tls-max-v1.3 "
          "tls-min-v1.0 tls-min-v1.1 trace-atomics-wait trace-event-categories= trace-promises "
          "trace-require-module= trace-sync-io trace-tls track-heap-objects use-largepages= v8-pool-size= "
          "no-force-async-hooks-checks disable-wasm-trap-handler", stop=True, ends="-e -p --eval --print",
          risky={k: "opens a debugger port or loads code or settings from elsewhere" for k in (
              "--inspect", "--inspect-brk", "--inspect-port", "--inspect-wait", "--inspect-publish-uid",
              "--openssl-config", "--env-file", "--env-file-if-exists", "--experimental-policy",
              "--experimental-loader", "--loader", "--snapshot-blob", "--build-snapshot", "--icu-data-dir",
              "--redirect-warnings", "--report-dir", "--report-directory", "--diagnostic-dir", "--cpu-prof-dir",
              "--heap-prof-dir", "--heapsnapshot-signal", "--watch", "--watch-path", "--test", "--run",
              "--require", "--import",
              "--experimental-permission", "--permission", "--allow-fs-read", "--allow-fs-write")})
_AWK_W = r"(version|interactive|posix_space|usage|help|dump|sprintf=\d+|random=\d+|posix|traditional|lint|" \
         r"re-interval|sandbox)"
_AWK = S("bcCgIMNnOPrsStVhLy *f: v: F: *e: *i: *l: >o:: >p:: >d:: D:: W:",
         "assign= field-separator= *file= characters-as-bytes traditional copyright gen-pot >dump-variables?= "
         "debug?= *source= lint?= bignum use-lc-numeric non-decimal-data no-optimize optimize >pretty-print?= "
         ">profile?= posix re-interval sandbox lint-old version help csv trace",
         stop=True, values={"-W": _AWK_W},
         risky={k: "runs or loads an awk program file the classifier does not read (use -f)" for k in (
             "-E", "--exec", "--include", "--load")})
LANGS: dict[str, Spec] = {
    **dict.fromkeys(("python", "python2", "python3", "pypy", "pypy3"), _PYTHON),
    "perl": _PERL, "ruby": _RUBY, **dict.fromkeys(("node", "nodejs", "bun", "deno"), _NODE),
    "php": S("aCFhHilmnqsvwe *r: *B: *R: *E: *f: *c: *d: t: *S:", "no-php-ini info lint modules *run= "
             "*process-begin= *process-code= *process-file= *process-end= syntax-highlight strip rf= rc= re= ri= "
             "ini?= help version", stop=True, ends="-r",
             risky={"-z": "loads a Zend extension (a library)", "--zend-extension": "loads a Zend extension (a "
                                                                                    "library)",
                    "--define": "sets php.ini entries (auto_prepend_file runs a file)",
                    "--php-ini": "reads another php.ini (auto_prepend_file runs a file)"}),
    "lua": S("ivEW *e: *l:", stop=True), "luajit": S("ivEWjO *e: *l:", stop=True,
                                                      risky={"-b": "writes compiled bytecode to a file"}),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk", "busybox-awk"), _AWK),
}

_PSQL = S("aAbeEhHlnqsStVwWxXz01? *c: d: *f: F: h: >L: *o: p: P: R: T: U: v:",
          "echo-all no-align echo-errors *command= dbname= echo-queries echo-hidden *file= field-separator= host= "
          "html list >log-file= no-readline *output= port= pset= quiet record-separator= single-step single-line "
          "tuples-only table-attr= username= set= variable= version no-password password expanded no-psqlrc "
          "field-separator-zero record-separator-zero single-transaction help?= csv")
_MYSQL = S("ABbCEfHiNnqrstUvVwX?I#TLGo h: P: u: p:: D: *e: S: c",
           "host= port= user= password?= database= *execute= batch skip-column-names silent table verbose version "
           "vertical raw html xml protocol= socket= ssl ssl-mode= ssl-ca= ssl-cert= ssl-key= ssl-verify-server-cert "
           "default-character-set= no-auto-rehash auto-rehash connect-timeout= max-allowed-packet= column-names "
           "help compress quick unbuffered wait force ignore-spaces safe-updates i-am-a-dummy select-limit= "
           "show-warnings no-beep column-type-info comments skip-comments binary-mode line-numbers "
           "skip-line-numbers print-defaults no-defaults abort-source-on-error auto-vertical-output binary-as-hex "
           "character-sets-dir= connect-expired-password debug-check debug-info delimiter= "
           "enable-cleartext-plugin max-join-size= named-commands skip-named-commands net-buffer-length= "
           "one-database print-query-on-error progress-reports prompt= quick-max-column-width= reconnect "
           "skip-reconnect sandbox secure-auth sigint-ignore ssl-capath= ssl-cipher= ssl-crl= ssl-crlpath= "
           "tls-version= disable-tee",
           risky={k: "runs a pager, writes a log, or loads options or plugins from elsewhere" for k in (
               "--pager", "--tee", "--init-command", "--defaults-file", "--defaults-extra-file", "--plugin-dir",
               "--default-auth", "--load-data-local-dir", "--system-command", "--defaults-group-suffix",
               "--login-path", "--local-infile")})
_SQLITE_WORDS = ("-append -ascii -bail -batch -box -column -csv -deserialize -echo -header -noheader -html "
                 "-interactive -json -line -list -markdown -memtrace -nofollow -pcachetrace -quote -readonly "
                 "-safe -stats -table -tabs -version -help -zip -maxsize: -mmap: -newline: -nonce: -nullvalue: "
                 "-separator: -vfs: -escape: *-cmd: *-init: -lookaside:")
DATABASES: dict[str, Spec] = {
    "psql": _PSQL, "mysql": _MYSQL, "mariadb": _MYSQL,
    "sqlite3": S(_SQLITE_WORDS, risky={"-A": "runs an archive command (it may extract files)",
                                       "-unsafe-testing": "turns off sqlite's safety checks"}),
    "sqlite": S(_SQLITE_WORDS, risky={"-A": "runs an archive command (it may extract files)"}),
    "duckdb": S("s c: *f: " + _SQLITE_WORDS, risky={"-ui": "starts a web server",
                                                    "-unsigned": "loads unsigned extensions"}),
    "sqlcmd": S("EeIbWCNXyY? S: d: U: P: Q: q: *i: *o: h: s: w: l: t: v: H: a: c: L: m: M: k: r: u: R: z: Z:",
                _DB_OPTS),
    "clickhouse-client": S("nmtVEh d: u: q: f: h:", "host= port= user= password= database= query= multiquery "
                           "multiline format= time version help vertical secure"),
    "clickhouse": S("", "help version", stop=True),
    "cockroach": S("", "help version", stop=True),
    "pgcli": S("wWvl h: p: U: u: d:", "host= port= username= user= password no-password dbname= version "
               "single-connection list row-limit= less-chatty prompt= prompt-dsn= auto-vertical-output warn= help"),
    "mycli": S("tvR h: P: u: p: S: D: e:", "host= port= user= password= socket= database= execute= table csv "
               "warn no-warn version help prompt= auto-vertical-output"),
    "litecli": S("tvR e: D:", "execute= database= prompt= auto-vertical-output table csv warn version help"),
    "usql": S("NJCtqXwWV1 c: *f: *o: v:", "command= file= out= set= no-password json csv tuples-only quiet no-rc "
              "password single-transaction version help"),
}
# The subcommands of database tools that are only a client.
DB_SUBCOMMANDS = {"clickhouse": frozenset({"client"}), "cockroach": frozenset({"sql", "version"})}

_SSH_O = (r"(?i)\s*((BatchMode|ConnectTimeout|ConnectionAttempts|StrictHostKeyChecking|LogLevel|ServerAliveInterval|"
          r"ServerAliveCountMax|Port|User|IdentityFile|IdentitiesOnly|PasswordAuthentication|PubkeyAuthentication|"
          r"PreferredAuthentications|Compression|ForwardAgent|ForwardX11|RequestTTY|HostName|AddressFamily|"
          r"CheckHostIP|HashKnownHosts|NumberOfPasswordPrompts|TCPKeepAlive|ExitOnForwardFailure|UpdateHostKeys|"
          r"VisualHostKey|Ciphers|MACs|KexAlgorithms|HostKeyAlgorithms|PubkeyAcceptedKeyTypes|"
          r"PubkeyAcceptedAlgorithms|SetEnv|SendEnv|ControlMaster|ControlPersist|ProxyJump|ProxyCommand|"
          r"LocalCommand|PermitLocalCommand|KnownHostsCommand|EscapeChar|ClearAllForwardings|LocalForward|"
          r"RemoteForward|DynamicForward|GatewayPorts|IPQoS|RekeyLimit|Tunnel|TunnelDevice|VerifyHostKeyDNS|"
          r"CanonicalizeHostname|BindAddress|BindInterface|LogVerbose|NoHostAuthenticationForLocalhost|"
          r"ObscureKeystrokeTiming|SessionType|StdinNull|ForkAfterAuthentication|EnableEscapeCommandline|"
          r"AddKeysToAgent|IdentityAgent|CertificateFile|HostbasedAuthentication|KbdInteractiveAuthentication|"
          r"ChallengeResponseAuthentication|GSSAPIAuthentication|GSSAPIDelegateCredentials|FingerprintHash|"
          r"RequiredRSASize|ForwardX11Trusted|ForwardX11Timeout)\s*[= ].*"
          r"|(UserKnownHostsFile|GlobalKnownHostsFile)\s*[= ]\s*/dev/null\s*)")
OTHERS: dict[str, Spec] = {
    "ssh": S("46AaCfGgKkMNnqsTtVvXxYy B: b: c: D: >E: *F: i: J: L: l: m: O: *o: p: Q: R: >S: W: w:", stop=True,
             values={"-o": _SSH_O}, risky={"-I": "loads a PKCS#11 library"}),
    "script": S("aefqhVk *c: >I: >O: >B: >T: t:: E: o: m:", "append *command= echo= flush force >log-in= "
                ">log-io= >log-out= >log-timing= logging-format= output-limit= quiet return timing?=" + _GNU),
    "crontab": S("lrieVcT u: n"),
    # These always ask (another user, later): their rules read the command they run.
    "su": FREE, "runuser": FREE, "sg": FREE, "at": FREE, "batch": FREE,
    "kill": FREE, "pkill": FREE, "killall": FREE, "killall5": FREE, "shutdown": FREE, "reboot": FREE,
    "halt": FREE, "poweroff": FREE, "init": FREE, "telinit": FREE, "service": FREE, "shred": FREE,
    "herald": FREE,
    "date": S("Ru d: f: I:: r: *s:", "date= debug file= iso-8601?= reference= resolution rfc-3339= rfc-email "
              "*set= universal utc" + _GNU),
    "hostname": S("aAbdfiIsyvnhV *F:", "alias all-fqdns all-ip-addresses boot domain *file= fqdn ip-address long "
                  "nis node short verbose yp" + _GNU),
    "dmesg": S("HJkLPprSuwWxdeTthV F: f: l: s:", "buffer-size= color?= ctime decode facility= file= follow "
               "follow-new force-prefix human json kernel level= noescape nopager notime raw reltime show-delta "
               "since= syslog time-format= until= userspace" + _GNU,
               risky={**dict.fromkeys(("-C", "--clear", "-c", "--read-clear"), "clears the kernel log"),
                      **dict.fromkeys(("-D", "--console-off", "-E", "--console-on", "-n", "--console-level"),
                                      "changes what the kernel prints on the console")}),
    "journalctl": S("abefhklmNqrxQ c: D: F: g: i: n: o: p: S: t: T: u: U: M: I", "after-cursor= all boot?= "
                    "case-sensitive?= catalog cursor= >cursor-file= directory= disk-usage dmesg dump-catalog "
                    "exclude-identifier= facility= field= fields file= follow full grep= header identifier= image= "
                    "interval= invocation= lines?= list-boots list-catalog list-invocations list-namespaces "
                    "machine= merge namespace= no-full no-hostname no-pager no-tail output= output-fields= "
                    "pager-end priority= quiet reverse root= show-cursor since= synchronize-on-exit= system "
                    "truncate-newline unit= until= user user-unit= utc verify verify-key= force" + _GNU,
                    numbers=True,
                    risky={k: "changes the system journal" for k in (
                        "--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush", "--sync",
                        "--relinquish-var", "--smart-relinquish-var", "--setup-keys", "--update-catalog")}),
    "systemctl": S("ahlqrtTif H: M: n: o: p: P: s:", "all full host= machine= no-pager no-legend no-ask-password "
                   "lines= output= property= value plain quiet recursive reverse state= type= user system global "
                   "runtime show-types failed now force wait no-block no-reload no-wall job-mode= "
                   "check-inhibitors= root= image= preset-mode= legend= timestamp= with-dependencies before after "
                   "show-transaction what= kill-whom= kill-value= signal= dry-run marked firmware-setup "
                   "boot-loader-menu= boot-loader-entry= reboot-argument= message= when= read-only mkdir"
                   + _GNU),
    "loginctl": S("ahlqp H: M: n: o: P: s:", "all full host= machine= no-pager no-legend no-ask-password lines= "
                  "output= property= value signal= kill-whom=" + _GNU),
    **dict.fromkeys(("timedatectl", "hostnamectl", "localectl"), S(
        "ahpV H: M:", "adjust-system-clock monitor no-ask-password no-pager value all property= host= machine= "
                      "static transient pretty json= no-convert" + _GNU)),
    "man": S("dDfkKlwWciIau7tZ?VhY *H:: X:: T:: *C: R: L: m: M: S: s: e: *P: r: E: *p:",
             "all apropos ascii catman *config-file= debug default ditroff encoding= extension= global-apropos "
             "gxditview?= *html?= ignore-case local-file locale= location location-cat manpath= match-case "
             "names-only nh no-hyphenation no-justification no-subpages *pager= path *preprocessor= prompt= "
             "recode= regex sections= systems= troff troff-device?= update usage warnings?= whatis where "
             "where-cat wildcard" + _GNU),
    "more": S("dlfpcsuehV n:", "silent logical no-pause print-over clean-print exit-on-eof squeeze plain lines="
              + _GNU, numbers=True),
    "less": S(
        "?aABcCdeEfFgGiIJKLmMnNqQrRsSuUVwWXz~ b: h: j: *k: *o: *O: p: P: t: T: x: y: #: D:",
        "auto-buffers buffers= clear-screen CLEAR-SCREEN dumb color= quit-at-eof QUIT-AT-EOF force "
        "quit-if-one-screen hilite-search HILITE-SEARCH hilite-unread HILITE-UNREAD max-back-scroll= ignore-case "
        "IGNORE-CASE jump-target= status-column *lesskey-file= *lesskey-src= RAW-CONTROL-CHARS raw-control-chars "
        "long-prompt LONG-PROMPT line-numbers LINE-NUMBERS *log-file= *LOG-FILE= pattern= prompt= quiet QUIET "
        "silent SILENT chop-long-lines tag= tag-file= UNDERLINE-SPECIAL underline-special window= "
        "max-forw-scroll= no-init no-keypad tabs= follow-name mouse MOUSE no-histdups rscroll= save-marks "
        "use-backslash use-color wheel-lines= incsearch line-num-width= status-col-width= file-size header= "
        "no-vbell redraw-on-quit search-options= proc-backspace PROC-BACKSPACE proc-tab PROC-TAB proc-return "
        "PROC-RETURN exit-follow-on-close intr= no-search-headers no-number-headers form-feed match-shift= "
        "wordwrap WORDWRAP shift= squeeze-blank-lines search-skip-screen SEARCH-SKIP-SCREEN no-lessopen quotes= "
        "quit-on-intr tilde" + _GNU,
        risky={"--lesskey-content": "binds keys to commands"}),
    **dict.fromkeys(("rg", "ripgrep"), S(
        "0abcFhHiIlLnNopPqsSuUvwxzV. A: B: C: d: e: E: f: g: j: m: M: r: t: T:",
        "after-context= before-context= binary block-buffered byte-offset case-sensitive color= colors= column "
        "context= context-separator= count count-matches crlf debug dfa-size-limit= encoding= engine= "
        "field-context-separator= field-match-separator= file= files files-with-matches files-without-match "
        "fixed-strings follow glob= glob-case-insensitive heading hidden !hostname-bin= hyperlink-format= iglob= "
        "ignore-case ignore-file= ignore-file-case-insensitive include-zero invert-match json line-buffered "
        "line-number line-regexp max-columns= max-columns-preview max-count= max-depth= maxdepth= max-filesize= "
        "mmap multiline multiline-dotall no-config no-filename no-heading no-ignore no-ignore-dot "
        "no-ignore-exclude no-ignore-files no-ignore-global no-ignore-messages no-ignore-parent no-ignore-vcs "
        "no-line-number no-messages no-mmap no-pcre2-unicode no-require-git no-unicode null null-data "
        "one-file-system only-matching passthru passthrough path-separator= pcre2 pcre2-version *pre= pre-glob= "
        "pretty quiet regex-size-limit= regexp= replace= search-zip smart-case sort= sortr= sort-files stats "
        "stop-on-nonmatch text threads= trace trim type= type-add= type-clear= type-list type-not= unrestricted "
        "vimgrep with-filename word-regexp auto-hybrid-regex no-auto-hybrid-regex no-block-buffered "
        "no-byte-offset no-column no-context-separator no-crlf no-encoding no-fixed-strings no-follow "
        "no-glob-case-insensitive no-hidden no-ignore-file-case-insensitive no-include-zero no-invert-match "
        "no-json no-line-buffered no-max-columns-preview no-multiline no-multiline-dotall no-one-file-system "
        "no-pcre2 no-pre no-search-zip no-sort-files no-text no-trim no-stats generate= field-separator="
        + _GNU)),
    **dict.fromkeys(("fd", "fdfind"), S(
        "HIuisgFalLp01qh d: t: e: E: S: o: *x: *X: c: j:",
        "hidden no-hidden no-ignore ignore no-ignore-vcs ignore-vcs no-require-git no-ignore-parent unrestricted "
        "case-sensitive ignore-case glob regex fixed-strings and= absolute-path relative-path list-details follow "
        "no-follow full-path print0 max-depth= min-depth= exact-depth= exclude= prune type= extension= size= "
        "changed-within= changed-before= newer= older= owner= format= *exec= *exec-batch= batch-size= "
        "ignore-file= color= hyperlink?= threads= max-results= quiet show-errors base-directory= path-separator= "
        "search-path= strip-cwd-prefix?= one-file-system" + _GNU)),
    "black": S("qvhSCx c: l: t: W:", "check diff color no-color line-length= target-version= pyi ipynb "
               "python-cell-magics= skip-source-first-line skip-string-normalization skip-magic-trailing-comma "
               "preview unstable enable-unstable-feature= fast safe required-version= exclude= extend-exclude= "
               "force-exclude= include= stdin-filename= line-ranges= workers= quiet verbose config= code=" + _GNU),
    "docker": S("Dlv H: c:", "debug log-level= host= context= tls tlscacert= tlscert= tlskey= tlsverify" + _GNU,
                stop=True),
    "podman": S("Dv c:", "log-level= connection= url= identity= remote root= runroot= storage-driver= "
                "events-backend=" + _GNU, stop=True),
}
# docker/podman: the options of the subcommands that only read.
DOCKER_READ = S("aqsnltHf: n: d:", "all quiet size latest last= filter= format= no-trunc digests tree follow "
                "tail= timestamps since= until= details type= no-stream human limit= json pretty services status= "
                "platform= all-tags disable-content-trust resolve no-resolve short" + _GNU)

_RUFF_COMMON = ("target-version= preview no-preview extension= exclude= extend-exclude= respect-gitignore "
                "no-respect-gitignore force-exclude no-force-exclude line-length= no-cache >cache-dir= "
                "stdin-filename= config= isolated quiet silent verbose help")
RUFF = S("hV", "help version", stop=True, subs={
    "check": S("nqsvwe *o:", _RUFF_COMMON + " *fix no-fix *unsafe-fixes no-unsafe-fixes show-fixes no-show-fixes "
               "diff watch *fix-only no-fix-only ignore-noqa output-format= *output-file= statistics *add-noqa "
               "show-files show-settings exit-zero exit-non-zero-on-fix select= ignore= extend-select= "
               "extend-ignore= per-file-ignores= extend-per-file-ignores= fixable= unfixable= extend-fixable= "
               "extend-unfixable= dummy-variable-rgx= show-source no-show-source"),
    "format": S("nqsv", _RUFF_COMMON + " check diff range= exit-non-zero-on-format"),
    "rule": S("", "all output-format= help"), "version": S("", "output-format= help"),
    "linter": S("", "output-format= help"), "config": S("", "output-format= help"), "help": FREE,
})
