"""The words of the built-in corpus, English beside Italian, with the facts the grammar needs:
gender, plural, and *kinds* that say which words make sense together (people read books, dogs
do not; you go to the park, `al parco`, but to the doctor, `dal medico`).

The tables are text, one entry a line, parsed by `lexicon()` on first use. A noun without a
plural (`bread/-`) is a mass noun: `some bread` is `del pane`, never `a bread`.

Noun kinds: person, kin (family: `mio fratello` takes no article), trade (you go *to* them:
`dal medico`), animal, beast (four-legged: runs, jumps), swimmer, food, drink, ingredient,
dish, cook, language; what one can do with a thing: read, write, open, wash, clean, fix, break,
small (lost, found, taken), carry, use, look, watch, listen, sing, instrument, vehicle, send,
pay, finish, understand, build, furniture, tableware; where a thing can be: place, inside (`in
the kitchen` → `nella cucina`), container (`in the box`), surface (`on the table` → `sul
tavolo`), ground (a surface people stand, sit or lie on), under, landmark (near, behind, in
front of), destination (`to the park` → `al
parco`), visit; owned (a person or place one says `my` of: my friend, my room; things, animals, food
and family always are); unique (only `the`: the sea). A verb lists the kinds of its objects and
of its subjects.
"""
from dataclasses import dataclass
from functools import cache

from numpy_transformer.data import italian

NOUNS = """
# english singular/plural   italian singular/plural   gender   kinds
boy/boys                    ragazzo/ragazzi           m   person
girl/girls                  ragazza/ragazze           f   person
man/men                     uomo/uomini               m   person
woman/women                 donna/donne               f   person
child/children              bambino/bambini           m   person
friend/friends              amico/amici               m   person owned
student/students            studente/studenti         m   person
teacher/teachers            insegnante/insegnanti     m   person owned
doctor/doctors              medico/medici             m   person trade owned
dentist/dentists            dentista/dentisti         m   person trade owned
barber/barbers              barbiere/barbieri         m   person trade owned
lawyer/lawyers              avvocato/avvocati         m   person trade owned
psychologist/psychologists  psicologo/psicologi       m   person trade owned
nurse/nurses                infermiera/infermiere     f   person
cook/cooks                  cuoco/cuochi              m   person
waiter/waiters              cameriere/camerieri       m   person
farmer/farmers              contadino/contadini       m   person
writer/writers              scrittore/scrittori       m   person
singer/singers              cantante/cantanti         m   person
artist/artists              artista/artisti           m   person
pilot/pilots                pilota/piloti             m   person
engineer/engineers          ingegnere/ingegneri       m   person
policeman/policemen         poliziotto/poliziotti     m   person
neighbour/neighbours        vicino/vicini             m   person owned
guest/guests                ospite/ospiti             m   person owned
tourist/tourists            turista/turisti           m   person
king/kings                  re/re                     m   person
queen/queens                regina/regine             f   person
brother/brothers            fratello/fratelli         m   person kin
sister/sisters              sorella/sorelle           f   person kin
mother/mothers              madre/madri               f   person kin
father/fathers              padre/padri               m   person kin
son/sons                    figlio/figli              m   person kin
daughter/daughters          figlia/figlie             f   person kin
uncle/uncles                zio/zii                   m   person kin
aunt/aunts                  zia/zie                   f   person kin
grandfather/grandfathers    nonno/nonni               m   person kin
grandmother/grandmothers    nonna/nonne               f   person kin
cousin/cousins              cugino/cugini             m   person kin
husband/husbands            marito/mariti             m   person kin
wife/wives                  moglie/mogli              f   person kin
dog/dogs                    cane/cani                 m   animal beast swimmer
cat/cats                    gatto/gatti               m   animal beast
horse/horses                cavallo/cavalli           m   animal beast swimmer
bird/birds                  uccello/uccelli           m   animal
cow/cows                    mucca/mucche              f   animal beast
sheep/sheep                 pecora/pecore             f   animal beast
mouse/mice                  topo/topi                 m   animal beast
pig/pigs                    maiale/maiali             m   animal beast
duck/ducks                  anatra/anatre             f   animal swimmer
squirrel/squirrels          scoiattolo/scoiattoli     m   animal beast
bear/bears                  orso/orsi                 m   animal beast swimmer
lion/lions                  leone/leoni               m   animal beast
elephant/elephants          elefante/elefanti         m   animal beast swimmer
wolf/wolves                 lupo/lupi                 m   animal beast
rabbit/rabbits              coniglio/conigli          m   animal beast
fox/foxes                   volpe/volpi               f   animal beast
spider/spiders              ragno/ragni               m   animal
goat/goats                  capra/capre               f   animal beast
donkey/donkeys              asino/asini               m   animal beast
fish/fish                   pesce/pesci               m   food cook look
apple/apples                mela/mele                 f   food
orange/oranges              arancia/arance            f   food
banana/bananas              banana/banane             f   food
pear/pears                  pera/pere                 f   food
egg/eggs                    uovo/uova                 m/f food cook
cake/cakes                  torta/torte               f   food dish
sandwich/sandwiches         panino/panini             m   food dish
pizza/pizzas                pizza/pizze               f   food dish
biscuit/biscuits            biscotto/biscotti         m   food
potato/potatoes             patata/patate             f   food cook
tomato/tomatoes             pomodoro/pomodori         m   food
carrot/carrots              carota/carote             f   food cook
lemon/lemons                limone/limoni             m   food
strawberry/strawberries     fragola/fragole           f   food
peach/peaches               pesca/pesche              f   food
onion/onions                cipolla/cipolle           f   food cook
steak/steaks                bistecca/bistecche        f   food cook
sausage/sausages            salsiccia/salsicce        f   food cook
bread/-                     pane/-                    m   food dish
rice/-                      riso/-                    m   food cook
meat/-                      carne/-                   f   food cook
cheese/-                    formaggio/-               m   food
soup/-                      zuppa/-                   f   food dish cook
pasta/-                     pasta/-                   f   food cook
sugar/-                     zucchero/-                m   ingredient
salt/-                      sale/-                    m   ingredient
oil/-                       olio/-                    m   ingredient
chocolate/-                 cioccolato/-              m   food
honey/-                     miele/-                   m   food
butter/-                    burro/-                   m   ingredient
fruit/-                     frutta/-                  f   food
salad/-                     insalata/-                f   food dish
jam/-                       marmellata/-              f   food
water/-                     acqua/-                   f   drink
milk/-                      latte/-                   m   drink
coffee/-                    caffè/-                   m   drink
tea/-                       tè/-                      m   drink
wine/-                      vino/-                    m   drink
beer/-                      birra/-                   f   drink
juice/-                     succo/-                   m   drink
lemonade/-                  limonata/-                f   drink
music/-                     musica/-                  f   listen
grass/-                     erba/-                    f   surface ground
book/books                  libro/libri               m   thing read write open small carry finish
letter/letters              lettera/lettere           f   thing read write small send
newspaper/newspapers        giornale/giornali         m   thing read small carry
magazine/magazines          rivista/riviste           f   thing read small
map/maps                    mappa/mappe               f   thing read look small use
story/stories               storia/storie             f   read write listen finish
pen/pens                    penna/penne               f   thing small use
pencil/pencils              matita/matite             f   thing small use
key/keys                    chiave/chiavi             f   thing small
wallet/wallets              portafoglio/portafogli    m   thing small
ticket/tickets              biglietto/biglietti       m   thing small send pay
bag/bags                    borsa/borse               f   thing open small carry container
box/boxes                   scatola/scatole           f   thing open carry build container
suitcase/suitcases          valigia/valigie           f   thing open carry container
backpack/backpacks          zaino/zaini               m   thing open small carry container
bottle/bottles              bottiglia/bottiglie       f   thing open break carry
chair/chairs                sedia/sedie               f   thing furniture surface fix break carry ground
table/tables                tavolo/tavoli             m   thing furniture surface fix clean
sofa/sofas                  divano/divani             m   thing furniture surface ground
bed/beds                    letto/letti               m   thing furniture surface ground
shelf/shelves               scaffale/scaffali         m   thing furniture surface
desk/desks                  scrivania/scrivanie       f   thing furniture surface clean
door/doors                  porta/porte               f   open fix landmark
window/windows              finestra/finestre         f   open fix break clean landmark
car/cars                    macchina/macchine         f   thing wash fix clean use vehicle
bicycle/bicycles            bicicletta/biciclette     f   thing wash fix use
phone/phones                telefono/telefoni         m   thing small fix break use
computer/computers          computer/computer         m   thing fix break use
clock/clocks                orologio/orologi          m   thing fix break look
lamp/lamps                  lampada/lampade           f   thing fix break
radio/radios                radio/radio               f   thing fix listen
umbrella/umbrellas          ombrello/ombrelli         m   thing small fix use under
shoe/shoes                  scarpa/scarpe             f   thing wash clean
hat/hats                    cappello/cappelli         m   thing small
shirt/shirts                camicia/camicie           f   thing wash
jacket/jackets              giacca/giacche            f   thing wash
dress/dresses               vestito/vestiti           m   thing wash
scarf/scarves               sciarpa/sciarpe           f   thing small wash
ball/balls                  palla/palle               f   thing small
toy/toys                    giocattolo/giocattoli     m   thing small
gift/gifts                  regalo/regali             m   thing send
postcard/postcards          cartolina/cartoline       f   thing send read small
picture/pictures            quadro/quadri             m   thing look
photo/photos                foto/foto                 f   thing look small send
mirror/mirrors              specchio/specchi          m   thing break clean look
glass/glasses               bicchiere/bicchieri       m   thing tableware wash break clean
plate/plates                piatto/piatti             m   thing tableware wash break clean
cup/cups                    tazza/tazze               f   thing tableware wash break clean
knife/knives                coltello/coltelli         m   thing tableware wash use
spoon/spoons                cucchiaio/cucchiai        m   thing tableware wash use
fork/forks                  forchetta/forchette       f   thing tableware wash use
notebook/notebooks          quaderno/quaderni         m   thing small
guitar/guitars              chitarra/chitarre         f   thing instrument
piano/pianos                pianoforte/pianoforti     m   thing instrument
violin/violins              violino/violini           m   thing instrument
drum/drums                  tamburo/tamburi           m   thing instrument
flower/flowers              fiore/fiori               m   thing look
plant/plants                pianta/piante             f   thing look
tree/trees                  albero/alberi             m   look under landmark
song/songs                  canzone/canzoni           f   listen sing write
film/films                  film/film                 m   watch finish
match/matches               partita/partite           f   watch finish
show/shows                  spettacolo/spettacoli     m   watch finish
lesson/lessons              lezione/lezioni           f   understand finish
question/questions          domanda/domande           f   understand
bill/bills                  conto/conti               m   pay
bus/buses                   autobus/autobus           m   vehicle
train/trains                treno/treni               m   vehicle
taxi/taxis                  taxi/taxi                 m   vehicle
house/houses                casa/case                 f   place inside clean build owned
school/schools              scuola/scuole             f   place inside owned
kitchen/kitchens            cucina/cucine             f   place inside clean owned
garden/gardens              giardino/giardini         m   place inside owned
park/parks                  parco/parchi              m   place inside destination
station/stations            stazione/stazioni         f   place inside destination
market/markets              mercato/mercati           m   place destination
museum/museums              museo/musei               m   place inside destination visit
cinema/cinemas              cinema/cinema             m   place inside destination
theatre/theatres            teatro/teatri             m   place inside destination
stadium/stadiums            stadio/stadi              m   place inside destination
zoo/zoos                    zoo/zoo                   m   place inside destination visit
restaurant/restaurants      ristorante/ristoranti     m   place inside destination
airport/airports            aeroporto/aeroporti       m   place destination
hospital/hospitals          ospedale/ospedali         m   place inside destination
library/libraries           biblioteca/biblioteche    f   place inside
office/offices              ufficio/uffici            m   place inside clean owned
shop/shops                  negozio/negozi            m   place inside owned
bank/banks                  banca/banche              f   place inside
church/churches             chiesa/chiese             f   place inside visit
square/squares              piazza/piazze             f   place inside
river/rivers                fiume/fiumi               m   place destination
lake/lakes                  lago/laghi                m   place destination
sea/-                       mare/-                    m   place destination unique
forest/forests              bosco/boschi              m   place inside
hotel/hotels                albergo/alberghi          m   place inside destination
bar/bars                    bar/bar                   m   place inside destination
room/rooms                  stanza/stanze             f   place inside clean owned
bathroom/bathrooms          bagno/bagni               m   place inside clean owned
classroom/classrooms        aula/aule                 f   place inside clean owned
port/ports                  porto/porti               m   place inside destination
castle/castles              castello/castelli         m   place inside destination visit build
university/universities     università/università     f   place inside destination visit owned
village/villages            villaggio/villaggi        m   place inside visit owned
city/cities                 città/città               f   place inside visit owned
farm/farms                  fattoria/fattorie         f   place inside destination visit owned
beach/beaches               spiaggia/spiagge          f   place surface ground
mountain/mountains          montagna/montagne         f   place surface ground
island/islands              isola/isole               f   place surface visit ground
bridge/bridges              ponte/ponti               m   place surface build under ground
roof/roofs                  tetto/tetti               m   surface ground
floor/floors                pavimento/pavimenti       m   surface clean ground
wall/walls                  muro/muri                 m   surface build
Italian/-                   italiano/-                m   language
English/-                   inglese/-                 m   language
French/-                    francese/-                m   language
German/-                    tedesco/-                 m   language
Spanish/-                   spagnolo/-                m   language
"""

ADJECTIVES = """
# english   italian (m. sg., or the four forms m. sg./f. sg./m. pl./f. pl.)   the nouns it describes
tall        alto                                      person
short       basso                                     person
young       giovane                                   person animal
old         anziano                                   person
happy       felice                                    person animal
sad         triste                                    person animal
tired       stanco/stanca/stanchi/stanche             person animal
rich        ricco/ricca/ricchi/ricche                 person
poor        povero                                    person
kind        gentile                                   person
intelligent intelligente                              person animal
busy        occupato                                  person
ready       pronto                                    person
angry       arrabbiato                                person
calm        calmo                                     person animal
nervous     nervoso                                   person animal
famous      famoso                                    person place
strong      forte                                     person animal
thin        magro                                     person animal
brave       coraggioso                                person
lazy        pigro                                     person animal
shy         timido                                    person animal
polite      educato                                   person
sick        malato                                    person animal
funny       divertente                                person
friendly    simpatico/simpatica/simpatici/simpatiche  person
curious     curioso                                   person animal
serious     serio/seria/seri/serie                    person
hungry      affamato                                  animal
big         grande                                    animal food thing place
small       piccolo                                   animal food thing place
black       nero                                      animal thing
white       bianco/bianca/bianchi/bianche             animal thing
brown       marrone                                   animal thing
old         vecchio/vecchia/vecchi/vecchie            animal thing place
fat         grasso                                    animal
wild        selvatico/selvatica/selvatici/selvatiche  animal
fresh       fresco/fresca/freschi/fresche             food drink
hot         caldo                                     food drink
cold        freddo                                    food place drink
sweet       dolce                                     food drink
good        buono                                     food drink
delicious   delizioso                                 food
ripe        maturo                                    food
cheap       economico/economica/economici/economiche  food thing drink
expensive   costoso                                   food thing drink
red         rosso                                     thing
green       verde                                     thing
yellow      giallo                                    thing
blue        blu                                       thing
grey        grigio/grigia/grigi/grigie                thing
pink        rosa                                      thing
new         nuovo                                     thing place
heavy       pesante                                   thing
light       leggero                                   thing
broken      rotto                                     thing
clean       pulito                                    thing place
dirty       sporco/sporca/sporchi/sporche             thing place
beautiful   bello                                     thing place
ugly        brutto                                    thing place
modern      moderno                                   thing place
useful      utile                                     thing
long        lungo/lunga/lunghi/lunghe                 thing
round       rotondo                                   thing
soft        morbido                                   thing
strange     strano                                    thing
quiet       tranquillo                                place
noisy       rumoroso                                  place
empty       vuoto                                     place
crowded     affollato                                 place
ancient     antico/antica/antichi/antiche             place
dark        buio/buia/bui/buie                        place
"""

VERBS = """
# english   | italian     | object kinds; alone: no object needed; to: + to someone | subject kinds
eat         | mangiare    | food alone                        | person animal
drink       | bere        | drink alone                       | person animal
cook        | cucinare    | cook alone                        | person
prepare     | preparare   | dish                              | person
make        | fare        | dish                              | person
buy         | comprare    | thing food drink ingredient       | person
sell        | vendere     | thing food                        | person
choose      | scegliere   | thing food                        | person
order       | ordinare    | food drink                        | person
read        | leggere     | read alone                        | person
write       | scrivere    | write alone                       | person
open        | aprire      | open                              | person
close       | chiudere    | open                              | person
wash        | lavare      | wash                              | person
clean       | pulire      | clean                             | person
fix         | riparare    | fix                               | person
break       | rompere     | break                             | person beast
find        | trovare     | thing animal person               | person beast
lose        | perdere     | small                             | person
look for    | cercare     | small animal person               | person beast
forget      | dimenticare | small                             | person
take        | prendere    | small vehicle                     | person
carry       | portare     | carry                             | person
use         | usare       | use                               | person
see         | vedere      | thing animal person place         | person animal
watch       | guardare    | watch animal                      | person beast
look at     | guardare    | look animal person                | person beast
listen to   | ascoltare   | listen person                     | person beast
hear        | sentire     | listen person animal              | person beast
sing        | cantare     | sing alone                        | person
play        | suonare     | instrument                        | person
know        | conoscere   | person place                      | person beast
meet        | incontrare  | person                            | person
call        | chiamare    | person animal                     | person
help        | aiutare     | person                            | person
follow      | seguire     | person animal                     | person beast
visit       | visitare    | visit                             | person
wait for    | aspettare   | person vehicle                    | person beast
draw        | disegnare   | animal look place                 | person
paint       | dipingere   | furniture surface                 | person
build       | costruire   | furniture build                   | person
learn       | imparare    | language song                     | person
study       | studiare    | language alone                    | person
teach       | insegnare   | language                          | person
speak       | parlare     | language                          | person
understand  | capire      | understand person language        | person
finish      | finire      | finish dish                       | person
receive     | ricevere    | send                              | person
send        | mandare     | send to                           | person
give        | dare        | thing food to                     | person
show        | mostrare    | look read to                      | person
pay         | pagare      | pay                               | person
have        | avere       | thing animal kin                  | person beast
want        | volere      | thing food drink                  | person beast
sleep       | dormire     | alone                             | person animal
run         | correre     | alone                             | person beast
walk        | camminare   | alone                             | person beast
work        | lavorare    | alone                             | person
swim        | nuotare     | alone                             | person swimmer
dance       | ballare     | alone                             | person
laugh       | ridere      | alone                             | person
cry         | piangere    | alone                             | person
travel      | viaggiare   | alone                             | person
play        | giocare     | alone                             | person beast
rest        | riposare    | alone                             | person animal
smile       | sorridere   | alone                             | person
jump        | saltare     | alone                             | person beast
go out      | uscire      | alone                             | person beast
wait        | aspettare   | alone                             | person beast
"""

NAMES = """
# name  gender
Marco m
Luca m
Paolo m
Giorgio m
Roberto m
Matteo m
Pietro m
Carlo m
Anna f
Giulia f
Sara f
Elena f
Laura f
Maria f
Francesca f
Alice f
Chiara f
"""

CITIES = """
# english  italian
Rome Roma
London Londra
Paris Parigi
Florence Firenze
Venice Venezia
Milan Milano
Naples Napoli
Turin Torino
Genoa Genova
Berlin Berlino
Athens Atene
Lisbon Lisbona
Moscow Mosca
Vienna Vienna
Madrid Madrid
Geneva Ginevra
Brussels Bruxelles
Edinburgh Edimburgo
Amsterdam Amsterdam
Prague Praga
Warsaw Varsavia
"""


@dataclass(frozen=True)
class Noun:
    """A noun in both languages. The plurals are None for a mass noun (bread, water);
    `plural_gender` differs from `gender` for a few (l'uovo, le uova)."""
    english: str
    english_plural: str | None
    italian: str
    italian_plural: str | None
    gender: str
    plural_gender: str
    kinds: frozenset


@dataclass(frozen=True)
class Adjective:
    english: str
    forms: tuple          # Italian m. sg., f. sg., m. pl., f. pl.
    kinds: frozenset      # the noun kinds it describes


@dataclass(frozen=True)
class Verb:
    english: str          # base form; a phrasal verb has two words (look for)
    italian: str          # infinitive
    takes: frozenset      # object kinds, and 'alone' (no object needed), 'to' (+ to someone)
    subjects: frozenset   # the noun kinds that can be its subject


@dataclass(frozen=True)
class Name:
    """A person's name (the same in both languages) or a city's (Rome, Roma)."""
    english: str
    italian: str
    gender: str


@dataclass(frozen=True)
class Lexicon:
    nouns: tuple
    adjectives: tuple
    verbs: tuple
    names: tuple
    cities: tuple


def _rows(table):
    """The lines of a table, without its # comments."""
    return [line for line in table.strip().splitlines() if not line.startswith("#")]


def _noun(line):
    english, italian_forms, gender, *kinds = line.split()
    (singular, plural), (it_singular, it_plural) = english.split("/"), italian_forms.split("/")
    gender, plural_gender = gender.split("/") if "/" in gender else (gender, gender)
    return Noun(singular, None if plural == "-" else plural, it_singular, None if it_plural == "-" else it_plural,
                gender, plural_gender, frozenset(kinds))


def _adjective(line):
    english, italian_forms, *kinds = line.split()
    return Adjective(english, italian.adjective_forms(italian_forms), frozenset(kinds))


def _verb(line):
    english, infinitive, takes, subjects = (column.strip() for column in line.split("|"))
    return Verb(english, infinitive, frozenset(takes.split()), frozenset(subjects.split()))


@cache
def lexicon():
    """The parsed tables (read once, on first use)."""
    return Lexicon(nouns=tuple(_noun(line) for line in _rows(NOUNS)),
                   adjectives=tuple(_adjective(line) for line in _rows(ADJECTIVES)),
                   verbs=tuple(_verb(line) for line in _rows(VERBS)),
                   names=tuple(Name(name, name, gender) for name, gender in map(str.split, _rows(NAMES))),
                   cities=tuple(Name(english, italian_name, "f") for english, italian_name in map(str.split, _rows(CITIES))))
